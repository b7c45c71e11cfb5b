// The command line of gradwire-worker: flag definitions and their
// validation into SyncOptions and TrainerOptions.
#ifndef GRADWIRE_WORKER_WORKER_FLAGS_H_
#define GRADWIRE_WORKER_WORKER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/parameter_sync.h"
#include "worker/trainer.h"

namespace gradwire {

struct WorkerConfig {
  SyncOptions sync;
  TrainerOptions trainer;
  std::string summary_json;
};

// Reads the parsed flags. INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<WorkerConfig> WorkerConfigFromFlags();

// --help text: usage and every worker flag with its default.
std::string WorkerFlagsHelp();

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_WORKER_FLAGS_H_
