#include "worker/momentum_placement.h"

#include <algorithm>
#include <string>

#include "absl/status/statusor.h"

namespace gradwire {
namespace {

// Compressors that send every element at (nearly) full precision.
bool IsLossless(const SyncSettings& s) {
  return s.compressor == "none" || s.compressor == "fp16" ||
         s.compressor == "bf16";
}

// Where momentum runs, decided from the compressor and the mode
// (sync_settings.h; the measurements behind it in docs/convergence.md).
MomentumPlacement AutomaticPlacement(const SyncSettings& s) {
  if (IsLossless(s) && s.mode == "bsp") return MomentumPlacement::kServer;
  // 1-bit sign: a velocity under a sign compressor diverges (MLP 3 epochs
  // 0.52, CNN 1 epoch 0.10) where folding trains (0.85, 0.81). Folding
  // needs error feedback to carry the history.
  if (s.compressor == "onebit" && s.error_feedback) {
    return MomentumPlacement::kFold;
  }
  // Other compressed pushes: DGC's rule. Folding diverges on the CNN for
  // sparsifiers (Top-K 1%: 0.29 against 0.88), where its SGD step of
  // lr / (1 - m) is too large for a fresh network.
  return MomentumPlacement::kWorker;
}

absl::StatusOr<MomentumPlacement> ParsePlacement(const SyncSettings& s,
                                                 const Complaint& bad) {
  const std::string& where = s.momentum_placement;
  if (where == "auto") return AutomaticPlacement(s);
  if (where == "server") return MomentumPlacement::kServer;
  if (where == "worker") return MomentumPlacement::kWorker;
  if (where == "fold") return MomentumPlacement::kFold;
  return bad("momentum_placement", "'%s' is not auto, fold, worker or server",
             where);
}

// 1-bit Adam (Tang et al., ICML 2021): Adam's second moment is not linear
// in the gradient, so error feedback's delayed sums would distort it; it is
// estimated from dense pushes during adam_freeze_step steps and then
// frozen, after which the update is linear in the first moment, which the
// workers keep as a velocity and compress with error feedback.
absl::Status PlaceAdam(const SyncSettings& s, const Complaint& bad,
                       SyncOptions* sync) {
  const std::string& where = s.momentum_placement;
  if (where != "auto" && where != "server" && where != "worker") {
    return bad("momentum_placement",
               "'%s' is not auto, worker or server for --optimizer=%s", where,
               s.optimizer);
  }
  const bool worker = where == "worker" ||
                      (where == "auto" && !IsLossless(s) && s.error_feedback);
  v1::OptimizerConfig* optimizer = sync->training.mutable_optimizer();
  if (!worker || optimizer->momentum() == 0) return absl::OkStatus();
  if (s.adam_freeze_step < 1) {
    return bad("adam_freeze_step",
               "%d must be >= 1: the shards estimate Adam's second moment "
               "from that many dense steps",
               s.adam_freeze_step);
  }
  if (s.dgc_momentum > 0) {
    return bad("dgc_momentum",
               "adam's first moment runs on the workers (1-bit Adam); leave "
               "dgc's momentum 0 or set --momentum-placement=server");
  }
  sync->worker_momentum.momentum = optimizer->momentum();
  sync->worker_momentum.masking = s.momentum_masking;
  sync->worker_momentum.dense_steps =
      std::max(sync->worker_momentum.dense_steps,
               static_cast<uint64_t>(s.adam_freeze_step));
  // The shards count updates: one per step in BSP, one per push otherwise.
  const uint64_t updates_per_step =
      sync->training.mode() == v1::CONSISTENCY_MODE_BSP ? 1 : s.num_workers;
  optimizer->set_freeze_variance_after(
      static_cast<uint64_t>(s.adam_freeze_step) * updates_per_step);
  return absl::OkStatus();
}

}  // namespace

// Moves the momentum of the optimizer the shards were to run to where the
// placement says, and scales the asynchronous step size.
absl::Status ResolvePlacement(const SyncSettings& s, const Complaint& bad,
                              SyncOptions* sync) {
  absl::StatusOr<MomentumPlacement> placement = ParsePlacement(s, bad);
  if (!placement.ok()) return placement.status();
  v1::OptimizerConfig* optimizer = sync->training.mutable_optimizer();
  const bool adam = optimizer->kind() == v1::OPTIMIZER_KIND_ADAM ||
                    optimizer->kind() == v1::OPTIMIZER_KIND_ADAMW;
  if (adam) {
    if (absl::Status st = PlaceAdam(s, bad, sync); !st.ok()) return st;
  }
  const bool momentum = optimizer->kind() == v1::OPTIMIZER_KIND_MOMENTUM &&
                        optimizer->momentum() > 0;
  if (!momentum && !adam && s.momentum_placement != "auto") {
    return bad("momentum_placement",
               "'%s' applies to --optimizer=momentum or nesterov with "
               "momentum > 0, not to '%s'",
               s.momentum_placement, s.optimizer);
  }
  if (momentum && *placement != MomentumPlacement::kServer) {
    if (s.dgc_momentum > 0) {
      return bad("dgc_momentum",
                 "the optimizer's momentum is already placed by "
                 "--momentum-placement; set --optimizer=sgd to use dgc's "
                 "own, or leave it 0");
    }
    const float m = optimizer->momentum();
    if (*placement == MomentumPlacement::kWorker) {
      // The dense steps push the gradient while the velocity gathers it,
      // and the velocity would later send it again: only 1-bit Adam, whose
      // shards' Adam steps on the dense gradients and then hands its first
      // moment over, continues that way.
      if (s.dense_steps > 0) {
        return bad("dense_steps",
                   "%d dense steps beside the momentum on the worker would "
                   "send their gradients twice; set --momentum-placement="
                   "server or fold, or leave it 0",
                   s.dense_steps);
      }
      sync->worker_momentum.momentum = m;
      sync->worker_momentum.nesterov = optimizer->nesterov();
      sync->worker_momentum.masking = s.momentum_masking;
    } else {
      sync->folded_momentum = m;
      sync->fold_scale = static_cast<float>(s.fold_scale);
      optimizer->set_learning_rate(optimizer->learning_rate() * s.fold_scale /
                                   (1.0 - m));
    }
    optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
    optimizer->clear_momentum();
    optimizer->clear_nesterov();
  }
  if (sync->training.mode() != v1::CONSISTENCY_MODE_BSP && s.scale_async_lr) {
    optimizer->set_learning_rate(optimizer->learning_rate() /
                                 static_cast<double>(s.num_workers));
  }
  return absl::OkStatus();
}

}  // namespace gradwire
