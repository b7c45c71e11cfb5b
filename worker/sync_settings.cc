#include "worker/sync_settings.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "common/precision.h"
#include "worker/auto_settings.h"
#include "worker/momentum_placement.h"
#include "worker/setting_complaint.h"

namespace gradwire {
namespace {

// The table's range of a Conditional entry, where its setting is used.
template <typename T>
absl::Status CheckWhereUsed(SettingIndex index, const T& value,
                            const Complaint& bad) {
  const SettingInfo& info = SettingInfos()[static_cast<size_t>(index)];
  const std::string outside = RangeViolation(info, value);
  return outside.empty() ? absl::OkStatus() : bad(info.name, "%s", outside);
}

absl::Status ResolveOptimizer(const SyncSettings& s, const Complaint& bad,
                              v1::OptimizerConfig* optimizer) {
  optimizer->set_learning_rate(s.lr);
  optimizer->set_weight_decay(s.weight_decay);
  optimizer->set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  const std::string& name = s.optimizer;
  if (name == "sgd") {
    optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
  } else if (name == "momentum" || name == "nesterov") {
    optimizer->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
    optimizer->set_momentum(s.momentum);
    optimizer->set_nesterov(name == "nesterov");
  } else if (name == "mean") {
    // The shards average and hand the mean on; the caller's own optimizer
    // steps on it.
    optimizer->set_kind(v1::OPTIMIZER_KIND_MEAN);
    if (s.weight_decay != 0) {
      return bad("weight_decay",
                 "%g beside optimizer 'mean', whose shards only average; "
                 "leave it 0",
                 s.weight_decay);
    }
  } else if (name == "adam" || name == "adamw") {
    optimizer->set_kind(name == "adam" ? v1::OPTIMIZER_KIND_ADAM
                                       : v1::OPTIMIZER_KIND_ADAMW);
    optimizer->set_momentum(s.momentum);
    optimizer->set_beta2(0.999f);
    optimizer->set_epsilon(1e-8f);
  } else {
    return bad("optimizer",
               "unknown optimizer '%s' (sgd, momentum, nesterov, adam, adamw, "
               "mean)",
               name);
  }
  return absl::OkStatus();
}

absl::Status ResolveMode(const SyncSettings& s, const Complaint& bad,
                         v1::TrainingConfig* training) {
  if (s.mode == "bsp") {
    training->set_mode(v1::CONSISTENCY_MODE_BSP);
  } else if (s.mode == "asp") {
    training->set_mode(v1::CONSISTENCY_MODE_ASP);
  } else if (s.mode == "ssp") {
    training->set_mode(v1::CONSISTENCY_MODE_SSP);
    if (absl::Status e =
            CheckWhereUsed(SettingIndex::staleness, s.staleness, bad);
        !e.ok()) {
      return e;
    }
    training->set_staleness(s.staleness);
  } else {
    return bad("mode", "'%s' is not bsp, asp or ssp", s.mode);
  }
  if (s.optimizer == "mean" && s.mode != "bsp") {
    return bad("mode",
               "'%s' beside optimizer 'mean': a step's mean needs every "
               "worker's push (bsp)",
               s.mode);
  }
  return absl::OkStatus();
}

// A quantizer's bucket: a multiple of 64 (the table bounds it to
// [0, 2^30]).
absl::Status ResolveBucket(absl::string_view key, int64_t bucket,
                           const Complaint& bad, uint32_t* out) {
  if (bucket % 64 != 0) {
    return bad(key,
               "%d is not a multiple of 64 in [0, 2^30] (0: one scale per "
               "chunk)",
               bucket);
  }
  *out = static_cast<uint32_t>(bucket);
  return absl::OkStatus();
}

absl::Status ResolveCompressor(const SyncSettings& s, const Complaint& bad,
                               SyncOptions* sync) {
  CompressorOptions& c = sync->compressor;
  c.name = s.compressor;
  c.ratio = s.ratio;
  c.min_kept = static_cast<uint64_t>(s.min_kept);
  c.threshold = static_cast<float>(s.threshold);
  c.levels = static_cast<uint32_t>(s.levels);
  if (absl::Status e =
          ResolveBucket("qsgd_bucket", s.qsgd_bucket, bad, &c.qsgd_bucket);
      !e.ok()) {
    return e;
  }
  if (absl::Status e = ResolveBucket("onebit_bucket", s.onebit_bucket, bad,
                                     &c.onebit_bucket);
      !e.ok()) {
    return e;
  }
  const auto precision = ParsePrecision(s.value_type);
  if (!precision) {
    return bad("value_type", "'%s' is not fp32, fp16 or bf16", s.value_type);
  }
  // "none" is no compression at all: fp32 whatever value_type says (fp16
  // and bf16 are compressors of their own).
  c.precision = s.compressor == "none" ? ValuePrecision::kFp32 : *precision;
  c.non_finite = s.non_finite == "zero" ? NonFinitePolicy::kZero
                                        : NonFinitePolicy::kReject;
  c.dgc.momentum = static_cast<float>(s.dgc_momentum);
  c.dgc.momentum_masking = s.dgc_momentum_masking;
  c.dgc.clip_norm = static_cast<float>(s.dgc_clip_norm);
  c.dgc.warmup_epochs = static_cast<int>(s.dgc_warmup_epochs);
  sync->error_feedback = s.error_feedback;
  sync->worker_momentum.dense_steps = static_cast<uint64_t>(s.dense_steps);
  sync->auto_budget = s.auto_budget;
  if (std::optional<SettingProblem> p = CheckAutoCompressor(s, c)) {
    return bad(p->key, "%s", p->message);
  }
  if (s.compressor == "auto") return absl::OkStatus();
  auto made = MakeCompressor(c);
  if (!made.ok()) return bad("compressor", "%s", made.status().message());
  if (!s.error_feedback && s.compressor == "dgc") {
    return bad("error_feedback", "dgc needs error feedback");
  }
  return absl::OkStatus();
}

double PullRatio(const SyncSettings& s) {
  if (s.pull_ratio > 0) return s.pull_ratio;
  // "auto" pushes mostly Top-K: its pulls are those of Top-K 1%.
  if (s.compressor == "auto") return kMinAutoPullRatio;
  return IsSparsifier(s.compressor) ? std::max(s.ratio, kMinAutoPullRatio)
                                    : kDenseCompressorPullRatio;
}

// What pull "auto" means: dense weights beside compressor "none", so that
// no compression means none in either direction, and beside optimizer
// "mean" (whose whole answers are as sparse as the step's mean); Top-K
// deltas otherwise.
std::string AutomaticPull(const SyncSettings& s) {
  return s.compressor == "none" || s.optimizer == "mean" ? "dense" : "delta";
}

absl::Status ResolvePull(const SyncSettings& s, const Complaint& bad,
                         SyncOptions* sync) {
  const std::string pull = s.pull == "auto" ? AutomaticPull(s) : s.pull;
  if (s.optimizer == "mean" && pull != "dense") {
    return bad("pull",
               "'%s' beside optimizer 'mean', whose shards answer each "
               "step's mean whole (its nonzero elements); use auto or dense",
               s.pull);
  }
  if (pull == "dense") {
    sync->pull_deltas = false;
    return absl::OkStatus();
  }
  if (pull == "exact") {
    // Every changed element at fp32: lossless, and as sparse as the
    // shards' update (the mean of sparse pushes under plain SGD).
    sync->pull_deltas = true;
    v1::PullEncoding* encoding = sync->training.mutable_pull_encoding();
    encoding->set_compressor("nonzero");
    encoding->set_ratio(1.0);
    encoding->set_value_type(v1::VALUE_TYPE_FP32);
    return absl::OkStatus();
  }
  if (pull != "delta") {
    return bad("pull", "'%s' is not auto, dense, exact or delta", s.pull);
  }
  if (absl::Status e =
          CheckWhereUsed(SettingIndex::pull_ratio, s.pull_ratio, bad);
      !e.ok()) {
    return e;
  }
  const auto precision = ParsePrecision(s.pull_value_type);
  if (!precision) {
    return bad("pull_value_type", "'%s' is not fp32, fp16 or bf16",
               s.pull_value_type);
  }
  sync->pull_deltas = true;
  v1::PullEncoding* encoding = sync->training.mutable_pull_encoding();
  encoding->set_compressor("topk");
  encoding->set_ratio(PullRatio(s));
  encoding->set_value_type(ToWire(*precision));
  return absl::OkStatus();
}

// The node's store when the setting is empty: one port above MASTER_PORT
// (torchrun's default 29500 when unset), so that it never takes the port of
// the store that torchrun, a Kubernetes operator or the script's own
// init_process_group hosts there.
std::string DefaultLocalStore() {
  constexpr int kTorchrunMasterPort = 29500;
  int master_port = kTorchrunMasterPort;
  const char* text = std::getenv("MASTER_PORT");
  if (text != nullptr && (!absl::SimpleAtoi(text, &master_port) ||
                          master_port < 1 || master_port > 65534)) {
    return absl::StrCat("127.0.0.1:MASTER_PORT=", text);
  }
  return absl::StrCat("127.0.0.1:", master_port + 1);
}

absl::Status ResolveTopology(const SyncSettings& s, const Complaint& bad,
                             SyncOptions* sync) {
  for (const std::string& address : s.shards) {
    if (!address.empty()) sync->shard_addresses.push_back(address);
  }
  if (sync->shard_addresses.empty()) return bad("shards", "no address given");
  if (s.worker_id >= s.num_workers)
    return bad("worker_id", "%d is outside [0, %d)", s.worker_id,
               s.num_workers);
  sync->num_workers = s.num_workers;
  sync->client.worker_id = s.worker_id;
  if (s.local_rank >= s.local_size) {
    return bad("local_rank", "%d is outside [0, %d)", s.local_rank,
               s.local_size);
  }
  sync->local.size = s.local_size;
  sync->local.rank = s.local_rank;
  const std::string store_address =
      s.local_store.empty() ? DefaultLocalStore() : s.local_store;
  const std::vector<std::string> store = absl::StrSplit(store_address, ':');
  int port = 0;
  if (store.size() != 2 || !absl::SimpleAtoi(store[1], &port) || port <= 0 ||
      port > 65535) {
    return bad("local_store", "'%s' is not host:port", store_address);
  }
  sync->local.store_host = store[0];
  sync->local.store_port = port;
  if (s.partition_bytes % 4 != 0) {
    return bad("partition_bytes", "%d must be a positive multiple of 4",
               s.partition_bytes);
  }
  sync->partition_bytes = s.partition_bytes;
  sync->compress_threads = static_cast<int>(s.compress_threads);
  sync->push_bucket_bytes = static_cast<uint64_t>(s.push_bucket_bytes);
  sync->residual_spare = s.residual_spare;
  sync->client.connect_timeout = absl::Seconds(s.connect_timeout_seconds);
  sync->client.rpc_timeout = absl::Seconds(s.rpc_timeout_seconds);
  sync->client.pull_timeout = absl::Seconds(s.pull_timeout_seconds);
  return absl::OkStatus();
}

}  // namespace

std::string FlagName(absl::string_view key) {
  return absl::StrCat("--", absl::StrReplaceAll(key, {{"_", "-"}}));
}

absl::StatusOr<SyncOptions> SyncOptionsFromSettings(
    const SyncSettings& settings, const SettingNamer& namer) {
  const Complaint bad(namer);
  if (absl::Status s = CheckSettingRanges(settings, namer); !s.ok()) {
    return s;
  }
  SyncOptions sync;
  for (absl::Status s :
       {ResolveTopology(settings, bad, &sync),
        ResolveCompressor(settings, bad, &sync),
        ResolveOptimizer(settings, bad, sync.training.mutable_optimizer()),
        ResolveMode(settings, bad, &sync.training),
        ResolvePull(settings, bad, &sync)}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = ResolvePlacement(settings, bad, &sync); !s.ok()) {
    return s;
  }
  absl::StatusOr<TransportSecurity> transport =
      LoadTransportSecurity(settings.transport, TransportRole::kClient);
  if (!transport.ok()) return transport.status();
  sync.client.transport = *std::move(transport);
  return sync;
}

}  // namespace gradwire
