// The command line of gradwire-worker: flag definitions and their
// validation into SyncOptions and TrainerOptions.
#ifndef GRADWIRE_TRAINER_WORKER_FLAGS_H_
#define GRADWIRE_TRAINER_WORKER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/trainer.h"
#include "worker/sync_options.h"

namespace gradwire {

struct WorkerConfig {
  SyncOptions sync;
  TrainerOptions trainer;
  std::string summary_json;
  // --dry-run: check the flags and exit.
  bool dry_run = false;
  // The /metrics endpoint: port 0 lets the OS pick, -1 turns it off.
  std::string metrics_address = "0.0.0.0";
  int64_t metrics_port = 0;
  std::string metrics_port_file;
  // How long /metrics stays up after training.
  double metrics_linger_seconds = 0;
};

// Reads the parsed flags. INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<WorkerConfig> WorkerConfigFromFlags();

// --help text: usage and every worker flag with its default.
std::string WorkerFlagsHelp();

// The Abseil names of every worker flag (for the environment and
// --dry-run, see common/command_line.h).
absl::Span<const absl::string_view> WorkerFlagNames();

}  // namespace gradwire

#endif  // GRADWIRE_TRAINER_WORKER_FLAGS_H_
