// The worker's synchronisation settings by name, as a person writes them:
// the flags of gradwire-worker and the keyword arguments of the Python
// package (python/) both fill a SyncSettings, and SyncOptionsFromSettings
// alone decides what "momentum", "ssp" or "delta" means and which values
// are allowed. The defaults here are the defaults of every front end.
//
// Thread safety: plain values and a pure function.
#ifndef GRADWIRE_WORKER_SYNC_SETTINGS_H_
#define GRADWIRE_WORKER_SYNC_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tls/transport_security.h"
#include "worker/sync_options.h"

namespace gradwire {

// Where the optimizer's momentum m runs.
enum class MomentumPlacement {
  // On the shards, after aggregation (dense momentum SGD, exact when the
  // pushes are the gradients).
  kServer,
  // On each worker, before compression (momentum_correction.h), with SGD
  // on the shards.
  kWorker,
  // Nowhere as a velocity: the shards run SGD at fold_scale * lr / (1 - m),
  // a share of momentum's long-run step, and the error-feedback residual,
  // which releases what compression held back over later steps, stands in
  // for the velocity.
  // "auto" chooses it for 1-bit sign with error feedback, the one
  // compressor under which a worker velocity diverges; it diverges on the
  // CNN for sparsifiers.
  kFold,
};

// The delta pull ratio that pull_ratio 0 means beside a compressor that
// keeps every element (none, fp16, bf16, qsgd, onebit).
inline constexpr double kDenseCompressorPullRatio = 0.05;
// The smallest ratio pull_ratio 0 picks beside a sparsifier. Pulls at the
// push's ratio cost DGC 0.1% 20 points on the MLP (0.6728 against 0.8785
// with 5% pulls, 10 epochs, 3 seeds), while 1% pulls keep Top-K 1% where
// 5% pulls had it (docs/benchmarks/pulls.md).
inline constexpr double kMinAutoPullRatio = 0.01;

// SyncSettings::fold_scale's default: at momentum 0.9 the folded step is
// 4 * lr.
inline constexpr double kDefaultFoldScale = 0.4;

// SyncSettings::adam_freeze_step's default. On the MLP (Adam lr 0.001, 2
// workers, Top-K 1% + EF, 10 epochs, docs/convergence.md) 50 dense steps
// gave 0.8802 over 3 seeds against 0.8765 for 20 and 0.8782 for 200, whose
// dense pushes also cost 2.6 times the bytes of 50's.
inline constexpr int64_t kDefaultAdamFreezeStep = 50;

struct SyncSettings {
  // Shard addresses (host:port), in shard-id order.
  std::vector<std::string> shards = {"127.0.0.1:7000"};
  int64_t worker_id = 0;
  int64_t num_workers = 1;
  // Ranks of one node average their gradients (c10d) before pushing.
  int64_t local_rank = 0;
  int64_t local_size = 1;
  std::string local_store = "127.0.0.1:29500";
  // Gradient compression (common/compress/registry.h names).
  std::string compressor = "topk";
  double ratio = 0.01;
  // Sparsifiers: each chunk keeps at least this many elements per push
  // (CompressorOptions::min_kept). 64: at 16, DGC 0.1% diverged on one of
  // three CNN seeds (epoch-1 loss 1.3e15), which trains at 64 (0.8589
  // after one epoch); on the MLP 64 also did better after 3 epochs (0.8760
  // against 0.8688). docs/convergence.md.
  int64_t min_kept = 64;
  double threshold = 0.001;
  int64_t levels = 256;
  // qsgd: elements sharing one norm (CompressorOptions::qsgd_bucket).
  int64_t qsgd_bucket = 512;
  // onebit: elements sharing one scale (CompressorOptions::onebit_bucket).
  // 512: a small layer's elements are sent at their own size, not at the
  // mean magnitude of the chunk's largest layer (+0.6 points on the CNN's
  // first epoch, +6% pushed bytes; docs/convergence.md).
  int64_t onebit_bucket = 512;
  std::string value_type = "fp16";
  bool error_feedback = true;
  double dgc_momentum = 0.0;
  bool dgc_momentum_masking = true;
  double dgc_clip_norm = 0.0;
  int64_t dgc_warmup_epochs = 0;
  // Pulls: "dense" (the weights), "delta" (Top-K deltas of `pull_ratio`,
  // values in `pull_value_type`, with server-side error feedback), "exact"
  // (every changed element at fp32: lossless, and sparse when the shards'
  // update is, as plain SGD over sparse pushes makes it) or "auto" ("dense"
  // beside compressor "none", "delta" otherwise).
  std::string pull = "auto";
  // 0: as much as the push keeps, `ratio`, when the compressor is a
  // sparsifier (topk, randomk, dgc), so both directions shrink alike, but
  // at least kMinAutoPullRatio; kDenseCompressorPullRatio for the others.
  double pull_ratio = 0;
  std::string pull_value_type = "fp16";
  // The shards' optimizer: sgd, momentum, nesterov, adam, adamw.
  std::string optimizer = "momentum";
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  // Where the momentum of "momentum"/"nesterov" runs (MomentumPlacement):
  // "auto", "server", "worker" or "fold". For "adam"/"adamw": "server"
  // (Adam on the shards) or "worker" (1-bit Adam: the first moment on the
  // workers, the second frozen on the shards after adam_freeze_step dense
  // steps); "auto" picks "worker" for compressed pushes with error feedback
  // (compressors other than none, fp16 and bf16), "server" otherwise. For
  // momentum, "auto" picks, from what docs/convergence.md measured:
  //   uncompressed (none, fp16, bf16) BSP: server, where it is exact;
  //   onebit with error feedback: fold;
  //   everything else (compressed pushes, ASP, SSP): worker, before
  //   compression with masking (DGC's momentum correction), so that the
  //   shards apply neither error feedback's bursts nor stale pushes with a
  //   velocity of their own.
  std::string momentum_placement = "auto";
  // With momentum on the worker: zero a coordinate's velocity when a sparse
  // push sends it (DGC's momentum-factor masking).
  bool momentum_masking = true;
  // With momentum folded: the share of momentum's long-run step,
  // lr / (1 - m), that the shards' SGD takes, in (0, 1]. The full step
  // (0.5 at the default lr) costs 1-bit sign 6 points on the CNN's first
  // epoch against 0.4 of it (0.8024 against 0.8626, docs/convergence.md):
  // error feedback already releases a sign's lost magnitude over later
  // steps, so the full step overshoots.
  double fold_scale = kDefaultFoldScale;
  // adam/adamw with the placement "worker" (1-bit Adam): the steps of dense
  // fp32 pushes while the shards' Adam estimates its second moment, which
  // then freezes; afterwards each worker compresses its velocity
  // u = beta1 * u + g with error feedback and the shards divide it by the
  // frozen sqrt(v). >= 1.
  int64_t adam_freeze_step = kDefaultAdamFreezeStep;
  // ASP and SSP: the shards apply each push with lr / num_workers, its
  // share of a BSP step's mean, so that one push from every worker moves
  // the weights as far as one BSP step (a staleness-aware step size whose
  // staleness is the number of workers). false: every push at lr.
  bool scale_async_lr = true;
  // Consistency: bsp, asp or ssp (with `staleness`).
  std::string mode = "bsp";
  int64_t staleness = 2;
  int64_t partition_bytes = int64_t{4} << 20;
  // Threads that compress a push's chunks in parallel; 0: one per core this
  // process may run on.
  int64_t compress_threads = 0;
  // With overlap: push the announced gradients once those not yet pushed
  // hold this many bytes of float32 (SyncOptions::push_bucket_bytes); 0:
  // as soon as the pushing thread is free.
  int64_t push_bucket_bytes = int64_t{1} << 20;
  // SyncOptions::residual_spare.
  bool residual_spare = true;
  // Deadlines: each Init and Push; a Pull waiting for its step.
  double rpc_timeout_seconds = 30;
  double pull_timeout_seconds = 300;
  // How long connecting waits for every shard to answer.
  double connect_timeout_seconds = 30;
  // TLS and token files; read (and checked) by SyncOptionsFromSettings.
  TransportSecurityFiles transport;
};

// How an error message names a setting, given its key in snake_case
// ("value_type"): gradwire-worker says "--value-type", Python "value_type".
using SettingNamer = std::function<std::string(absl::string_view key)>;

// "--" + key with '_' turned into '-'.
std::string FlagName(absl::string_view key);

// Validates `settings` and resolves them into SyncOptions (metrics
// registry unset). Reads the TLS and token files. Errors:
// INVALID_ARGUMENT whose message starts with the offending setting's name,
// as `namer` writes it; a TLS file's own error for a bad certificate.
absl::StatusOr<SyncOptions> SyncOptionsFromSettings(
    const SyncSettings& settings, const SettingNamer& namer = FlagName);

// One line saying what runs where: "momentum 0.9 on the worker before
// compression (masked where sent); SGD lr 0.05 on the shards", for the
// start of a run's log.
std::string DescribeOptimizerPlacement(const SyncOptions& options);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SYNC_SETTINGS_H_
