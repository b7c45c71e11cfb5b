#include "apps/fashion_mnist/worker_flags.h"

#include <unistd.h>

#include <cmath>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "apps/fashion_mnist/progress.h"
#include "common/compress/registry.h"
#include "common/flags/metrics_flags.h"
#include "common/flags/program.h"
#include "common/flags/tls_flags.h"
#include "common/precision.h"
#include "worker/settings_reference.h"
#include "worker/sync_settings.h"

namespace {
// Every synchronisation flag's default is SyncSettings's.
const gradwire::SyncSettings kDefaults;
}  // namespace
using gradwire::StringList;

// The synchronisation flags, one per entry of the table of settings
// (worker/settings_table.h): its type, name, default and help.
#define GRADWIRE_SETTING_FLAG(Type, name, default_value, group, front_ends, \
                              range, help)                                  \
  ABSL_FLAG(Type, name, kDefaults.name, help);
GRADWIRE_SYNC_SETTINGS(GRADWIRE_SETTING_FLAG)
#undef GRADWIRE_SETTING_FLAG

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
          "network. The compute-only reference of bench/network/network.sh.");
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
#define GRADWIRE_COPY_FLAG(Type, name, ...) \
  s.name = absl::GetFlag(FLAGS_##name);
  GRADWIRE_SYNC_SETTINGS(GRADWIRE_COPY_FLAG)
#undef GRADWIRE_COPY_FLAG
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

// The synchronisation flags (the table's order), then the demo trainer's
// own, in --help order; the client TLS, metrics and --dry-run flags are
// shared (common/flags).
#define GRADWIRE_FLAG_NAME(Type, name, ...) #name,
constexpr absl::string_view kWorkerFlags[] = {
    GRADWIRE_SYNC_SETTINGS(GRADWIRE_FLAG_NAME) "data_dir",
    "model",
    "epochs",
    "batch_size",
    "max_steps",
    "train_limit",
    "test_limit",
    "seed",
    "evaluate",
    "progress",
    "step_delay_ms",
    "step_delay_every",
    "overlap",
    "pull_ahead",
    "compute_only",
    "tune_heap",
    "summary_json",
    "metrics_linger_seconds"};
#undef GRADWIRE_FLAG_NAME

}  // namespace

absl::StatusOr<WorkerConfig> WorkerConfigFromFlags() {
  WorkerConfig config;
  absl::StatusOr<SyncOptions> sync =
      SyncOptionsFromSettings(SettingsFromFlags());
  if (!sync.ok()) return sync.status();
  if (sync->training.optimizer().kind() == v1::OPTIMIZER_KIND_MEAN) {
    // This worker trains on the shards' weights; under "mean" they would be
    // each step's mean gradient.
    return Bad(
        "--optimizer: 'mean' hands each step's mean gradient back instead of "
        "weights, for a worker that runs its own optimizer (Python's "
        "DistributedOptimizer, the DDP hook); this worker's shards run the "
        "optimizer: sgd, momentum, nesterov, adam or adamw");
  }
  config.sync = *std::move(sync);
  config.settings_summary = DescribeSettings(SettingsFromFlags());
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
