#include "trainer/worker_flags.h"

#include <unistd.h>

#include <cmath>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/compress/registry.h"
#include "common/flags/metrics_flags.h"
#include "common/flags/program.h"
#include "common/flags/tls_flags.h"
#include "common/precision.h"
#include "trainer/progress.h"
#include "worker/sync_settings.h"

namespace {
// Every synchronisation flag's default is SyncSettings's.
const gradwire::SyncSettings kDefaults;
}  // namespace

ABSL_FLAG(std::string, shards, "127.0.0.1:7000",
          "Comma-separated shard addresses (host:port), in shard-id order.");
ABSL_FLAG(int64_t, worker_id, kDefaults.worker_id,
          "This node's worker id, in [0, --num-workers).");
ABSL_FLAG(int64_t, num_workers, kDefaults.num_workers,
          "Number of worker nodes.");
ABSL_FLAG(int64_t, local_rank, kDefaults.local_rank,
          "This process's rank inside its node.");
ABSL_FLAG(int64_t, local_size, kDefaults.local_size,
          "Processes on this node; > 1 reduces gradients inside the node "
          "(Gloo) before pushing.");
ABSL_FLAG(std::string, local_store, kDefaults.local_store,
          "host:port of the node's c10d TCPStore (hosted by local rank 0).");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "Directory holding the Fashion-MNIST .gz IDX files.");
ABSL_FLAG(std::string, model, "cnn", "Model: mlp or cnn.");
ABSL_FLAG(int64_t, epochs, 1, "Epochs to train.");
ABSL_FLAG(int64_t, batch_size, 64, "Examples per step on each worker.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0: no limit).");
ABSL_FLAG(int64_t, train_limit, 0,
          "Use only the first N training examples (0: all).");
ABSL_FLAG(int64_t, test_limit, 0,
          "Use only the first N test examples (0: all).");
ABSL_FLAG(int64_t, seed, 1, "Seed of model initialisation and batch order.");
ABSL_FLAG(double, metrics_linger_seconds, 0,
          "After training, keep /metrics up this long so that Prometheus "
          "scrapes the final counts (a scrape interval or two).");
ABSL_FLAG(bool, evaluate, true,
          "Measure test accuracy after every epoch (in BSP all workers hold "
          "the same weights; gradwire local evaluates on worker 0 only).");
ABSL_FLAG(std::string, compressor, kDefaults.compressor,
          "Gradient compressor: none, fp16, bf16, topk, randomk, threshold, "
          "dgc, qsgd, onebit.");
ABSL_FLAG(double, ratio, kDefaults.ratio,
          "Fraction of elements sparsifiers keep.");
ABSL_FLAG(int64_t, min_kept, kDefaults.min_kept,
          "Sparsifiers (topk, randomk, dgc): every chunk keeps at least this "
          "many elements per push (all of a smaller one), so that small "
          "tensors such as biases and output layers are not starved at low "
          "ratios; 1: exactly --ratio.");
ABSL_FLAG(double, threshold, kDefaults.threshold,
          "threshold compressor: |g| to keep.");
ABSL_FLAG(int64_t, levels, kDefaults.levels, "qsgd: quantisation levels.");
ABSL_FLAG(int64_t, qsgd_bucket, kDefaults.qsgd_bucket,
          "qsgd: elements that share one norm, a multiple of 64 (0: one norm "
          "per chunk, which diverges with error feedback on large chunks).");
ABSL_FLAG(int64_t, onebit_bucket, kDefaults.onebit_bucket,
          "onebit: elements that share one scale, a multiple of 64 (0: one "
          "scale per chunk, which sends a small layer at a large one's "
          "magnitude).");
ABSL_FLAG(std::string, value_type, kDefaults.value_type,
          "Precision of pushed values: fp32, fp16 or bf16.");
ABSL_FLAG(bool, error_feedback, kDefaults.error_feedback,
          "Keep what compression left out for later steps.");
ABSL_FLAG(double, dgc_momentum, kDefaults.dgc_momentum,
          "dgc: momentum correction factor (0: off).");
ABSL_FLAG(bool, dgc_momentum_masking, kDefaults.dgc_momentum_masking,
          "dgc: momentum-factor masking.");
ABSL_FLAG(double, dgc_clip_norm, kDefaults.dgc_clip_norm,
          "dgc: local gradient clipping norm (0: off).");
ABSL_FLAG(int64_t, dgc_warmup_epochs, kDefaults.dgc_warmup_epochs,
          "dgc: epochs of sparsity warm-up.");
ABSL_FLAG(std::string, pull, kDefaults.pull,
          "Pulls: dense (full weights every step), delta (Top-K weight "
          "deltas with server-side error feedback), exact (every changed "
          "element at fp32: lossless, sparse under plain SGD of sparse "
          "pushes) or auto (dense beside --compressor=none, delta "
          "otherwise).");
ABSL_FLAG(double, pull_ratio, kDefaults.pull_ratio,
          "Fraction of elements a delta pull keeps; 0: the push's --ratio "
          "for topk, randomk and dgc (at least 0.01), 0.05 beside the other "
          "compressors.");
ABSL_FLAG(std::string, pull_value_type, kDefaults.pull_value_type,
          "Precision of delta pull values: fp32, fp16 or bf16 (the shards' "
          "error feedback keeps what rounding leaves out).");
ABSL_FLAG(std::string, optimizer, kDefaults.optimizer,
          "Server optimizer: sgd, momentum, nesterov, adam, adamw.");
ABSL_FLAG(double, lr, kDefaults.lr, "Learning rate.");
ABSL_FLAG(double, momentum, kDefaults.momentum, "Momentum (beta1 for adam).");
ABSL_FLAG(double, weight_decay, kDefaults.weight_decay, "Weight decay.");
ABSL_FLAG(std::string, momentum_placement, kDefaults.momentum_placement,
          "Where --optimizer=momentum/nesterov's momentum runs: server, "
          "worker (before compression, masked where sent; SGD on the "
          "shards), fold (SGD at --fold-scale * lr / (1 - momentum) on the "
          "shards; error "
          "feedback carries the history) or auto: server for uncompressed "
          "BSP, fold for onebit with error feedback, worker otherwise. For "
          "adam/adamw: server, or worker (1-bit Adam: the first moment on "
          "the worker after --adam-freeze-step dense steps, the second "
          "frozen on the shards); auto: worker for compressed pushes with "
          "error feedback.");
ABSL_FLAG(bool, momentum_masking, kDefaults.momentum_masking,
          "With momentum on the worker: zero a coordinate's velocity when a "
          "sparse push sends it (DGC's momentum-factor masking).");
ABSL_FLAG(double, fold_scale, kDefaults.fold_scale,
          "With momentum folded: the shards' SGD step is this share of "
          "lr / (1 - momentum), in (0, 1]; the full step overshoots under "
          "1-bit sign compression.");
ABSL_FLAG(int64_t, adam_freeze_step, kDefaults.adam_freeze_step,
          "adam/adamw on the worker (1-bit Adam): steps of dense fp32 pushes "
          "from which the shards estimate Adam's second moment before it "
          "freezes and pushes are compressed.");
ABSL_FLAG(bool, scale_async_lr, kDefaults.scale_async_lr,
          "asp/ssp: the shards apply each push at lr / --num-workers, its "
          "share of a BSP step (false: every push at --lr).");
ABSL_FLAG(std::string, mode, kDefaults.mode,
          "Consistency mode: bsp, asp or ssp.");
ABSL_FLAG(int64_t, staleness, kDefaults.staleness, "SSP staleness.");
ABSL_FLAG(int64_t, partition_bytes, kDefaults.partition_bytes,
          "Largest chunk in bytes.");
ABSL_FLAG(int64_t, compress_threads, kDefaults.compress_threads,
          "Threads that compress a push's chunks in parallel (0: one per "
          "core this process may run on).");
ABSL_FLAG(int64_t, push_bucket_bytes, kDefaults.push_bucket_bytes,
          "With --overlap: push the gradients backward() has finished once "
          "those not yet pushed hold this many bytes of float32, and the "
          "rest after backward() (0: each as soon as the pushing thread is "
          "free).");
ABSL_FLAG(bool, residual_spare, kDefaults.residual_spare,
          "Chunks of 512K floats and more keep a second error-feedback "
          "residual buffer, so that a gradient's non-finite check rides in "
          "the pass that adds it (4 more bytes per element of those chunks; "
          "false: a check pass of its own).");
ABSL_FLAG(double, rpc_timeout_seconds, kDefaults.rpc_timeout_seconds,
          "Deadline of each Init and Push.");
ABSL_FLAG(std::string, progress, "auto",
          "Progress display: auto (bar on a terminal, lines otherwise), bar, "
          "log or none.");
ABSL_FLAG(int64_t, step_delay_ms, 0,
          "Fault injection for tests and benchmarks: sleep this many "
          "milliseconds before pushing a step, to make this worker a "
          "straggler (0: off).");
ABSL_FLAG(int64_t, step_delay_every, 1,
          "With --step-delay-ms: sleep only before every N-th step (1: every "
          "step), an intermittent straggler.");
ABSL_FLAG(bool, overlap, true,
          "Push each parameter's gradient as soon as backward() has finished "
          "it, overlapping communication with the rest of the backward pass "
          "(with --local-size=1; the weights are the same either way).");
ABSL_FLAG(bool, pull_ahead, true,
          "With --overlap: pull each chunk's new weights as soon as its "
          "gradient is pushed, on a thread of its own, and start the next "
          "forward pass at once; each layer waits only for its own weights.");
ABSL_FLAG(bool, compute_only, false,
          "Train alone, without shards: the same data, model and steps, each "
          "step a local torch SGD step at --lr and --momentum, nothing on the "
          "network. The compute-only reference of bench/network.sh.");
ABSL_FLAG(bool, tune_heap, true,
          "Keep the training step's large buffers in the heap between steps "
          "(glibc malloc thresholds; common/heap_tuning.h) instead of mapping "
          "and faulting them in afresh each step. Settings given in "
          "GLIBC_TUNABLES or MALLOC_*_THRESHOLD_ win.");
ABSL_FLAG(std::string, summary_json, "",
          "Write the run's summary to this file.");

namespace gradwire {
namespace {

template <typename... Args>
absl::Status Bad(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// The synchronisation flags, by name; SyncOptionsFromSettings checks them.
SyncSettings SettingsFromFlags() {
  SyncSettings s;
  s.shards =
      absl::StrSplit(absl::GetFlag(FLAGS_shards), ',', absl::SkipEmpty());
  s.worker_id = absl::GetFlag(FLAGS_worker_id);
  s.num_workers = absl::GetFlag(FLAGS_num_workers);
  s.local_rank = absl::GetFlag(FLAGS_local_rank);
  s.local_size = absl::GetFlag(FLAGS_local_size);
  s.local_store = absl::GetFlag(FLAGS_local_store);
  s.compressor = absl::GetFlag(FLAGS_compressor);
  s.ratio = absl::GetFlag(FLAGS_ratio);
  s.min_kept = absl::GetFlag(FLAGS_min_kept);
  s.threshold = absl::GetFlag(FLAGS_threshold);
  s.levels = absl::GetFlag(FLAGS_levels);
  s.qsgd_bucket = absl::GetFlag(FLAGS_qsgd_bucket);
  s.onebit_bucket = absl::GetFlag(FLAGS_onebit_bucket);
  s.value_type = absl::GetFlag(FLAGS_value_type);
  s.error_feedback = absl::GetFlag(FLAGS_error_feedback);
  s.dgc_momentum = absl::GetFlag(FLAGS_dgc_momentum);
  s.dgc_momentum_masking = absl::GetFlag(FLAGS_dgc_momentum_masking);
  s.dgc_clip_norm = absl::GetFlag(FLAGS_dgc_clip_norm);
  s.dgc_warmup_epochs = absl::GetFlag(FLAGS_dgc_warmup_epochs);
  s.pull = absl::GetFlag(FLAGS_pull);
  s.pull_ratio = absl::GetFlag(FLAGS_pull_ratio);
  s.pull_value_type = absl::GetFlag(FLAGS_pull_value_type);
  s.optimizer = absl::GetFlag(FLAGS_optimizer);
  s.lr = absl::GetFlag(FLAGS_lr);
  s.momentum = absl::GetFlag(FLAGS_momentum);
  s.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  s.momentum_placement = absl::GetFlag(FLAGS_momentum_placement);
  s.momentum_masking = absl::GetFlag(FLAGS_momentum_masking);
  s.fold_scale = absl::GetFlag(FLAGS_fold_scale);
  s.adam_freeze_step = absl::GetFlag(FLAGS_adam_freeze_step);
  s.scale_async_lr = absl::GetFlag(FLAGS_scale_async_lr);
  s.mode = absl::GetFlag(FLAGS_mode);
  s.staleness = absl::GetFlag(FLAGS_staleness);
  s.partition_bytes = absl::GetFlag(FLAGS_partition_bytes);
  s.compress_threads = absl::GetFlag(FLAGS_compress_threads);
  s.push_bucket_bytes = absl::GetFlag(FLAGS_push_bucket_bytes);
  s.residual_spare = absl::GetFlag(FLAGS_residual_spare);
  s.rpc_timeout_seconds = absl::GetFlag(FLAGS_rpc_timeout_seconds);
  s.transport = ClientTlsFilesFromFlags();
  return s;
}

absl::Status ReadTrainer(TrainerOptions* t, const SyncOptions& sync) {
  t->data_dir = absl::GetFlag(FLAGS_data_dir);
  t->model = absl::GetFlag(FLAGS_model);
  if (t->model != "cnn" && t->model != "mlp")
    return Bad("--model: '%s' is not mlp or cnn", t->model);
  t->epochs = absl::GetFlag(FLAGS_epochs);
  if (t->epochs < 0) return Bad("--epochs: %d is negative", t->epochs);
  t->batch_size = absl::GetFlag(FLAGS_batch_size);
  if (t->batch_size < 1)
    return Bad("--batch-size: %d must be >= 1", t->batch_size);
  const int64_t max_steps = absl::GetFlag(FLAGS_max_steps);
  if (max_steps < 0) return Bad("--max-steps: %d is negative", max_steps);
  t->max_steps = max_steps;
  t->train_limit = absl::GetFlag(FLAGS_train_limit);
  t->test_limit = absl::GetFlag(FLAGS_test_limit);
  if (t->train_limit < 0 || t->test_limit < 0)
    return Bad("--train-limit/--test-limit must be >= 0");
  t->seed = absl::GetFlag(FLAGS_seed);
  t->evaluate = absl::GetFlag(FLAGS_evaluate);
  t->overlap = absl::GetFlag(FLAGS_overlap);
  const int64_t delay_ms = absl::GetFlag(FLAGS_step_delay_ms);
  if (delay_ms < 0 || delay_ms > 3600000) {
    return Bad("--step-delay-ms: %d is outside [0, 3600000]", delay_ms);
  }
  t->step_delay = absl::Milliseconds(delay_ms);
  t->step_delay_every = absl::GetFlag(FLAGS_step_delay_every);
  if (t->step_delay_every < 1) {
    return Bad("--step-delay-every: %d must be >= 1", t->step_delay_every);
  }
  const std::string progress = absl::GetFlag(FLAGS_progress);
  if (progress == "auto") {
    t->interactive = Progress::StdoutIsTerminal();
  } else if (progress == "bar" || progress == "log" || progress == "none") {
    t->interactive = progress == "bar";
    t->quiet = progress == "none";
  } else {
    return Bad("--progress: '%s' is not auto, bar, log or none", progress);
  }
  if (sync.local.rank != 0) t->quiet = true;
  return absl::OkStatus();
}

// The worker's own flags, in --help order; the client TLS, metrics and
// --dry-run flags are shared (common/flags).
constexpr absl::string_view kWorkerFlags[] = {"shards",
                                              "worker_id",
                                              "num_workers",
                                              "local_rank",
                                              "local_size",
                                              "local_store",
                                              "data_dir",
                                              "model",
                                              "epochs",
                                              "batch_size",
                                              "max_steps",
                                              "train_limit",
                                              "test_limit",
                                              "seed",
                                              "evaluate",
                                              "compressor",
                                              "ratio",
                                              "min_kept",
                                              "threshold",
                                              "levels",
                                              "qsgd_bucket",
                                              "onebit_bucket",
                                              "value_type",
                                              "error_feedback",
                                              "dgc_momentum",
                                              "dgc_momentum_masking",
                                              "dgc_clip_norm",
                                              "dgc_warmup_epochs",
                                              "pull",
                                              "pull_ratio",
                                              "pull_value_type",
                                              "optimizer",
                                              "lr",
                                              "momentum",
                                              "weight_decay",
                                              "momentum_placement",
                                              "momentum_masking",
                                              "fold_scale",
                                              "adam_freeze_step",
                                              "scale_async_lr",
                                              "mode",
                                              "staleness",
                                              "partition_bytes",
                                              "compress_threads",
                                              "push_bucket_bytes",
                                              "residual_spare",
                                              "rpc_timeout_seconds",
                                              "progress",
                                              "step_delay_ms",
                                              "step_delay_every",
                                              "overlap",
                                              "pull_ahead",
                                              "compute_only",
                                              "tune_heap",
                                              "summary_json",
                                              "metrics_linger_seconds"};

}  // namespace

absl::StatusOr<WorkerConfig> WorkerConfigFromFlags() {
  WorkerConfig config;
  absl::StatusOr<SyncOptions> sync =
      SyncOptionsFromSettings(SettingsFromFlags());
  if (!sync.ok()) return sync.status();
  config.sync = *std::move(sync);
  if (absl::Status s = ReadTrainer(&config.trainer, config.sync); !s.ok())
    return s;
  // Pulls run ahead only where pushes run during backward().
  config.sync.pull_ahead = absl::GetFlag(FLAGS_pull_ahead) &&
                           config.trainer.overlap &&
                           config.sync.local.size == 1;
  config.summary_json = absl::GetFlag(FLAGS_summary_json);
  config.compute_only = absl::GetFlag(FLAGS_compute_only);
  config.tune_heap = absl::GetFlag(FLAGS_tune_heap);
  config.trainer.local_lr = absl::GetFlag(FLAGS_lr);
  config.trainer.local_momentum = absl::GetFlag(FLAGS_momentum);
  config.metrics = MetricsEndpointFromFlags();
  if (absl::Status s = ValidateMetricsEndpoint(config.metrics); !s.ok()) {
    return s;
  }
  config.metrics_linger_seconds = absl::GetFlag(FLAGS_metrics_linger_seconds);
  if (!(config.metrics_linger_seconds >= 0 &&
        config.metrics_linger_seconds <= 3600)) {
    return Bad("--metrics-linger-seconds: %g is outside [0, 3600]",
               config.metrics_linger_seconds);
  }
  return config;
}

absl::Span<const absl::string_view> WorkerFlagNames() {
  static const std::vector<absl::string_view> names = JoinFlagNames(
      {kWorkerFlags, kClientTlsFlagNames, kMetricsFlagNames, kDryRunFlagNames});
  return names;
}

}  // namespace gradwire
