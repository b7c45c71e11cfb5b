// The one table of the worker's settings. Each setting is declared once,
// in GRADWIRE_SYNC_SETTINGS below: its type, name, default, group, front
// ends, allowed range and help. From that entry come
//   - the SyncSettings field and its default (sync_settings.h),
//   - gradwire-worker's flag (apps/fashion_mnist/worker_flags.cc; every
//     entry of GRADWIRE_SYNC_SETTINGS is a flag, which gradwire-worker
//     also reads from GRADWIRE_<NAME>),
//   - the Python keyword of gradwire.ParameterSync, its type check and its
//     line in the docstring (python/py_settings.cc), and gradwire.settings(),
//   - the variable a Python worker reads under `gradwire run` when the
//     entry has kRunEnvironment (python/gradwire/_env.py),
//   - the bounds and choices SyncOptionsFromSettings checks
//     (CheckSettingRanges), and
//   - docs/reference/settings.md (SettingsReferenceMarkdown).
// Adding a setting is one entry here plus the code that uses it.
//
// An entry is X(Type, name, default, group, front_ends, range, help):
//   Type        bool, int64_t, double, std::string or StringList;
//   name        snake_case; the flag is --name-with-hyphens;
//   default     a value of Type;
//   group       a heading: "topology", "compression", "pulls", ...;
//   front_ends  SettingFrontEnd bits beyond the flag;
//   range       AnyValue(), Closed(a, b), OpenClosed(a, b), ..., Choices();
//               Conditional(r) when r holds only where the setting is used
//               (SyncOptionsFromSettings checks it there);
//   help        one sentence or a few, referring to others as --name.
//
// GRADWIRE_TRANSPORT_SETTINGS lists the transport's settings the same way;
// their fields live in SyncSettings::transport (TransportSecurityFiles) and
// their flags are the client TLS flags of common/flags/tls_flags.h.
//
// Thread safety: constants and pure functions.
#ifndef GRADWIRE_WORKER_SETTINGS_TABLE_H_
#define GRADWIRE_WORKER_SETTINGS_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

using StringList = std::vector<std::string>;

// Where a setting can be given besides gradwire-worker's flag.
enum SettingFrontEnd : unsigned {
  // gradwire.ParameterSync(name=...) and gradwire.settings().
  kPythonKeyword = 1u << 0,
  // GRADWIRE_<NAME>, which `gradwire run` sets and gradwire.init() reads.
  kRunEnvironment = 1u << 1,
};

// Allowed values: a numeric interval, a list of strings, or anything.
struct SettingRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;
  // "a|b|c": the strings allowed; empty: any.
  absl::string_view choices;
  // True: the range holds only where the setting is used, and
  // SyncOptionsFromSettings checks it there (CheckSettingRange).
  bool conditional = false;

  constexpr bool bounded() const {
    return min != -std::numeric_limits<double>::infinity() ||
           max != std::numeric_limits<double>::infinity();
  }
};

constexpr SettingRange AnyValue() { return {}; }
constexpr SettingRange Closed(double min, double max) {
  return {min, max, false, false, {}, false};
}
constexpr SettingRange Open(double min, double max) {
  return {min, max, true, true, {}, false};
}
constexpr SettingRange OpenClosed(double min, double max) {
  return {min, max, true, false, {}, false};
}
constexpr SettingRange ClosedOpen(double min, double max) {
  return {min, max, false, true, {}, false};
}
constexpr SettingRange AtLeast(double min) {
  return {min,  std::numeric_limits<double>::infinity(), false, false, {},
          false};
}
constexpr SettingRange Choices(absl::string_view choices) {
  SettingRange range;
  range.choices = choices;
  return range;
}
constexpr SettingRange Conditional(SettingRange range) {
  range.conditional = true;
  return range;
}

}  // namespace gradwire

// clang-format off
#define GRADWIRE_SYNC_SETTINGS(X) \
  X(StringList, shards, StringList{"127.0.0.1:7000"}, "topology", \
    kPythonKeyword | kRunEnvironment, AnyValue(), \
    "Comma-separated shard addresses (host:port), in shard-id order.") \
  X(int64_t, worker_id, 0, "topology", kPythonKeyword, Closed(0, 65535), \
    "This node's worker id, in [0, --num-workers).") \
  X(int64_t, num_workers, 1, "topology", kPythonKeyword, Closed(1, 65536), \
    "Number of worker nodes.") \
  X(int64_t, local_rank, 0, "topology", kPythonKeyword, Closed(0, 63), \
    "This process's rank inside its node, in [0, --local-size).") \
  X(int64_t, local_size, 1, "topology", kPythonKeyword, Closed(1, 64), \
    "Processes on this node; > 1 reduces gradients inside the node (c10d: " \
    "Gloo on CPU, NCCL on CUDA) before pushing.") \
  X(std::string, local_store, "", "topology", \
    kPythonKeyword | kRunEnvironment, AnyValue(), \
    "host:port of the node's c10d TCPStore (hosted by local rank 0). " \
    "Empty: 127.0.0.1:MASTER_PORT+1 (MASTER_PORT from the environment, " \
    "29500 when unset), next to torchrun's store and never on it; " \
    "gradwire run sets a free port.") \
  /* Gradient compression (common/compress/registry.h names). */ \
  X(std::string, compressor, "topk", "compression", kPythonKeyword, \
    AnyValue(), \
    "Gradient compressor: none, fp16, bf16, topk, randomk, threshold, dgc, " \
    "qsgd, onebit, or auto (each step, per layer: Top-K 0.1% to 10%, " \
    "dense 16-bit or fp32, chosen from the measured link, backward time " \
    "and gradients; docs/compression.md).") \
  X(double, ratio, 0.01, "compression", kPythonKeyword, OpenClosed(0, 1), \
    "Fraction of elements sparsifiers keep (not with --compressor=auto, " \
    "which chooses it).") \
  X(double, auto_budget, 1.0, "compression", kPythonKeyword, \
    OpenClosed(0, 10), \
    "--compressor=auto: the pushed bytes may take this share of the " \
    "backward pass's time on the measured link (above 1: more bytes than " \
    "the backward pass hides).") \
  /* 64: at 16, DGC 0.1% diverged on one of three CNN seeds, which train \
     at 64; on the MLP 64 also did better (docs/convergence.md). */ \
  X(int64_t, min_kept, 64, "compression", kPythonKeyword, AtLeast(1), \
    "Sparsifiers (topk, randomk, dgc): every chunk keeps at least this " \
    "many elements per push (all of a smaller one), so that small tensors " \
    "such as biases and output layers are not starved at low ratios; 1: " \
    "exactly --ratio.") \
  X(double, threshold, 0.001, "compression", kPythonKeyword, \
    ClosedOpen(0, 1e30), "threshold compressor: |g| to keep.") \
  X(int64_t, levels, 256, "compression", kPythonKeyword, Closed(1, 65535), \
    "qsgd: quantisation levels.") \
  X(int64_t, qsgd_bucket, 512, "compression", kPythonKeyword, \
    Closed(0, 1 << 30), \
    "qsgd: elements that share one norm, a multiple of 64 (0: one norm per " \
    "chunk, which diverges with error feedback on large chunks).") \
  /* 512: a small layer's elements are sent at their own size, not at the \
     chunk's largest layer's, which raised the CNN's accuracy \
     (docs/convergence.md#measured-cnn-3-epochs-one-seed). */ \
  X(int64_t, onebit_bucket, 512, "compression", kPythonKeyword, \
    Closed(0, 1 << 30), \
    "onebit: elements that share one scale, a multiple of 64 (0: one scale " \
    "per chunk, which sends a small layer at a large one's magnitude).") \
  X(std::string, value_type, "fp16", "compression", kPythonKeyword, \
    Choices("fp32|fp16|bf16"), "Precision of pushed values.") \
  X(std::string, non_finite, "reject", "compression", kPythonKeyword, \
    Choices("reject|zero"), \
    "A gradient element that is infinite or NaN: reject fails the step " \
    "with an error naming the chunk; zero pushes it as 0 and keeps it out " \
    "of the error-feedback residual (DistributedOptimizer sets it and " \
    "skips such a step on every worker, as DDP with a GradScaler does).") \
  X(bool, error_feedback, true, "compression", kPythonKeyword, AnyValue(), \
    "Keep what compression left out for later steps.") \
  X(int64_t, dense_steps, 0, "compression", kPythonKeyword, AtLeast(0), \
    "The first N steps push every gradient uncompressed at fp32 and leave " \
    "the error-feedback residual alone: a dense warm-up (adam/adamw on the " \
    "worker take the longer of it and --adam-freeze-step; not beside "      \
    "momentum on the worker).") \
  X(double, dgc_momentum, 0.0, "compression", kPythonKeyword, AnyValue(), \
    "dgc: momentum correction factor (0: off).") \
  X(bool, dgc_momentum_masking, true, "compression", kPythonKeyword, \
    AnyValue(), "dgc: momentum-factor masking.") \
  X(double, dgc_clip_norm, 0.0, "compression", kPythonKeyword, AnyValue(), \
    "dgc: local gradient clipping norm (0: off).") \
  X(int64_t, dgc_warmup_epochs, 0, "compression", kPythonKeyword, \
    AnyValue(), "dgc: epochs of sparsity warm-up.") \
  X(std::string, pull, "auto", "pulls", kPythonKeyword, \
    Choices("auto|dense|exact|delta"), \
    "Pulls: dense (full weights every step), delta (Top-K weight deltas " \
    "of --pull-ratio in --pull-value-type with server-side error " \
    "feedback), exact (every changed element at fp32: lossless, sparse " \
    "under plain SGD of sparse pushes) or auto (dense beside " \
    "--compressor=none, delta otherwise).") \
  X(double, pull_ratio, 0, "pulls", kPythonKeyword, \
    Conditional(Closed(0, 1)), \
    "Fraction of elements a delta pull keeps; 0: the push's --ratio for " \
    "topk, randomk and dgc (at least 0.01), 0.05 beside the other " \
    "compressors.") \
  X(std::string, pull_value_type, "fp16", "pulls", kPythonKeyword, \
    Conditional(Choices("fp32|fp16|bf16")), \
    "Precision of delta pull values (the shards' error feedback keeps what " \
    "rounding leaves out).") \
  X(std::string, optimizer, "momentum", "optimizer", kPythonKeyword, \
    Choices("sgd|momentum|nesterov|adam|adamw|mean"), \
    "The shards' optimizer; mean: none, the shards hand each step's mean " \
    "on (for a worker that runs its own optimizer on it).") \
  X(double, lr, 0.05, "optimizer", kPythonKeyword, \
    Open(0, 1e6), "Learning rate.") \
  X(double, momentum, 0.9, "optimizer", kPythonKeyword, ClosedOpen(0, 1), \
    "Momentum (beta1 for adam).") \
  X(double, weight_decay, 0.0, "optimizer", kPythonKeyword, \
    ClosedOpen(0, 1e6), "Weight decay.") \
  /* What "auto" picks was measured in docs/convergence.md: server where \
     it is exact, fold for 1-bit sign (a worker velocity diverges), worker \
     (DGC's momentum correction) for other compressed, ASP or SSP pushes. */ \
  X(std::string, momentum_placement, "auto", "optimizer", kPythonKeyword, \
    Choices("auto|fold|worker|server"), \
    "Where --optimizer=momentum/nesterov's momentum runs: server, worker " \
    "(before compression, masked where sent; SGD on the shards), fold (SGD " \
    "at --fold-scale * lr / (1 - momentum) on the shards; error feedback " \
    "carries the history) or auto: server for uncompressed BSP, fold for " \
    "onebit with error feedback, worker otherwise. For adam/adamw: server, " \
    "or worker (1-bit Adam: the first moment on the worker after " \
    "--adam-freeze-step dense steps, the second frozen on the shards); " \
    "auto: worker for compressed pushes with error feedback.") \
  X(bool, momentum_masking, true, "optimizer", kPythonKeyword, AnyValue(), \
    "With momentum on the worker: zero a coordinate's velocity when a " \
    "sparse push sends it (DGC's momentum-factor masking).") \
  /* 0.4: the full step overshoots under 1-bit sign and costs accuracy \
     (docs/convergence.md#measured-cnn-3-epochs-one-seed); error feedback \
     already releases the rest. */ \
  X(double, fold_scale, kDefaultFoldScale, "optimizer", kPythonKeyword, \
    OpenClosed(0, 1), \
    "With momentum folded: the shards' SGD step is this share of lr / (1 - " \
    "momentum); the full step overshoots under 1-bit sign compression.") \
  X(int64_t, adam_freeze_step, kDefaultAdamFreezeStep, "optimizer", \
    kPythonKeyword, Conditional(AtLeast(1)), \
    "adam/adamw on the worker (1-bit Adam): steps of dense fp32 pushes " \
    "from which the shards estimate Adam's second moment before it freezes " \
    "and pushes are compressed.") \
  X(bool, scale_async_lr, true, "consistency", kPythonKeyword, AnyValue(), \
    "asp/ssp: the shards apply each push at lr / --num-workers, its share " \
    "of a BSP step (false: every push at --lr).") \
  X(std::string, mode, "bsp", "consistency", kPythonKeyword, \
    Choices("bsp|asp|ssp"), "Consistency mode.") \
  X(int64_t, staleness, 2, "consistency", kPythonKeyword, \
    Conditional(Closed(0, 1000)), "SSP staleness (with --mode=ssp).") \
  X(int64_t, partition_bytes, int64_t{4} << 20, "chunks", kPythonKeyword, \
    AtLeast(4), "Largest chunk in bytes of float32, a multiple of 4.") \
  X(int64_t, compress_threads, 0, "chunks", kPythonKeyword, \
    Closed(0, 1024), \
    "Threads that compress a push's chunks in parallel (0: one per core " \
    "this process may run on).") \
  X(int64_t, push_bucket_bytes, int64_t{1} << 20, "chunks", kPythonKeyword, \
    Closed(0, 1099511627776.0), \
    "With overlap: push the gradients backward() has finished once those " \
    "not yet pushed hold this many bytes of float32, and the rest after " \
    "backward() (0: each as soon as the pushing thread is free).") \
  X(bool, residual_spare, true, "chunks", kPythonKeyword, AnyValue(), \
    "Chunks of 512K floats and more keep a second error-feedback residual " \
    "buffer, so that a gradient's non-finite check rides in the pass that " \
    "adds it (4 more bytes per element of those chunks; false: a check " \
    "pass of its own).") \
  X(double, rpc_timeout_seconds, 30, "deadlines", kPythonKeyword, \
    OpenClosed(0, 86400), "Deadline of each Init and Push.") \
  X(double, pull_timeout_seconds, 300, "deadlines", kPythonKeyword, \
    OpenClosed(0, 86400), "How long a Pull waits for its step.") \
  X(double, connect_timeout_seconds, 30, "deadlines", kPythonKeyword, \
    OpenClosed(0, 86400), \
    "How long connecting waits for every shard to answer.")

#define GRADWIRE_TRANSPORT_SETTINGS(X) \
  X(std::string, tls_cert, "", "security", kPythonKeyword | kRunEnvironment, \
    AnyValue(), "PEM client certificate file (mutual TLS).") \
  X(std::string, tls_key, "", "security", kPythonKeyword | kRunEnvironment, \
    AnyValue(), "PEM key file of --tls-cert.") \
  X(std::string, tls_ca, "", "security", kPythonKeyword | kRunEnvironment, \
    AnyValue(), \
    "PEM CA certificates file the shards' certificates chain to; set: TLS.") \
  X(std::string, tls_server_name, "", "security", \
    kPythonKeyword | kRunEnvironment, AnyValue(), \
    "Name expected in the shards' certificates (empty: the address's " \
    "host).") \
  X(std::string, auth_token_file, "", "security", \
    kPythonKeyword | kRunEnvironment, AnyValue(), \
    "File holding the shards' bearer token.") \
  X(bool, allow_insecure_token, false, "security", \
    kPythonKeyword | kRunEnvironment, AnyValue(), \
    "Send --auth-token-file's token without TLS (no --tls-ca), in clear; " \
    "refused otherwise.")
// clang-format on

namespace gradwire {

enum class SettingType { kBool, kInt64, kDouble, kString, kStringList };

// One setting's entry, without its default (which is SyncSettings's).
struct SettingInfo {
  absl::string_view name;
  SettingType type;
  absl::string_view group;
  // SettingFrontEnd bits.
  unsigned front_ends;
  SettingRange range;
  absl::string_view help;
  // True for GRADWIRE_TRANSPORT_SETTINGS (fields of SyncSettings::transport).
  bool transport;
};

// Every setting, GRADWIRE_SYNC_SETTINGS then GRADWIRE_TRANSPORT_SETTINGS.
absl::Span<const SettingInfo> SettingInfos();

// The entry named `name`, or null.
const SettingInfo* FindSetting(absl::string_view name);

// The known name nearest to `name` by edit distance (for "did you mean").
std::string ClosestSettingName(absl::string_view name);

// The name of `type` as the reference and Python show it: "bool", "int",
// "float", "str", "list[str]".
absl::string_view SettingTypeName(SettingType type);

// "GRADWIRE_" + name in upper case: the variable of kRunEnvironment, and
// the one through which gradwire-worker reads the flag.
std::string SettingEnvironmentVariable(absl::string_view name);

// "(0, 1]", "[1, 65535]", ">= 1", "fp32, fp16, bf16" or "" for any value.
std::string DescribeRange(const SettingInfo& info);

// "" when `value` is within info's range (or the range is AnyValue()),
// else what is wrong: "0 is outside (0, 1]", "70000 is outside [1, 65535]".
std::string RangeViolation(const SettingInfo& info, double value);
std::string RangeViolation(const SettingInfo& info, int64_t value);
// "" when `value` is one of info's choices (or any string is allowed),
// else "'x' is not a, b or c".
std::string RangeViolation(const SettingInfo& info, absl::string_view value);
// Booleans and string lists have no range.
inline std::string RangeViolation(const SettingInfo&, bool) { return ""; }
inline std::string RangeViolation(const SettingInfo&, const StringList&) {
  return "";
}

// The index of each entry in SettingInfos().
enum class SettingIndex : size_t {
#define GRADWIRE_SETTING_INDEX(Type, name, ...) name,
  GRADWIRE_SYNC_SETTINGS(GRADWIRE_SETTING_INDEX)
      GRADWIRE_TRANSPORT_SETTINGS(GRADWIRE_SETTING_INDEX)
#undef GRADWIRE_SETTING_INDEX
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SETTINGS_TABLE_H_
