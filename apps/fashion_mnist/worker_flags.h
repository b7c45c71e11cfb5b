// The command line of gradwire-worker: flag definitions and their
// validation into SyncOptions and TrainerOptions.
#ifndef GRADWIRE_APPS_FASHION_MNIST_WORKER_FLAGS_H_
#define GRADWIRE_APPS_FASHION_MNIST_WORKER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "apps/fashion_mnist/trainer.h"
#include "common/flags/metrics_flags.h"
#include "worker/sync_options.h"

namespace gradwire {

struct WorkerConfig {
  SyncOptions sync;
  // The synchronisation settings that differ from their defaults
  // (DescribeSettings): the line a worker logs at start.
  std::string settings_summary;
  TrainerOptions trainer;
  std::string summary_json;
  // Train without shards (Train with no ParameterSync).
  bool compute_only = false;
  // Raise glibc's malloc thresholds first (common/heap_tuning.h).
  bool tune_heap = true;
  // The /metrics endpoint (common/flags/metrics_flags.h).
  MetricsEndpointSettings metrics;
  // How long /metrics stays up after training.
  double metrics_linger_seconds = 0;
};

// Reads the parsed flags. INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<WorkerConfig> WorkerConfigFromFlags();

// The first paragraph of --help.
inline constexpr absl::string_view kWorkerUsage =
    "gradwire-worker: trains Fashion-MNIST on gradwire parameter servers.\n"
    "Example: gradwire-worker --shards=127.0.0.1:7000,127.0.0.1:7001 "
    "--worker-id=0 --num-workers=2 --compressor=topk --ratio=0.01";

// The Abseil names of every gradwire-worker flag, its own and the shared
// ones, in --help order (for --help, the environment and --dry-run; see
// common/flags/program.h).
absl::Span<const absl::string_view> WorkerFlagNames();

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_WORKER_FLAGS_H_
