// One run of gradwire-bench-load: start the shards, Init them for every
// worker, run two phases of `steps` steps with all workers at once, read
// the shards' memory after each phase, stop the shards.
#ifndef GRADWIRE_BENCH_LOAD_RUN_H_
#define GRADWIRE_BENCH_LOAD_RUN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/load/config.h"
#include "bench/load/report.h"
#include "bench/load/workload.h"

namespace gradwire::bench {

struct RunSpec {
  // "run", "baseline" or "compare".
  std::string name;
  std::vector<std::string> server_args;
  // Checkpoint folders of this run's shards (<root>/shard-<i>); empty: none.
  std::string checkpoint_root;
  // An existing folder for port files and shard logs.
  std::string run_dir;
  std::string server_binary;
};

// Runs the benchmark once. Failed RPCs and a shard that does not exit
// cleanly are counted in the report's errors; an error status means the run
// could not take place (a shard did not start, an Init failed), and names
// the cause. `pushes` is modified (the steps of its requests).
absl::StatusOr<RunReport> RunLoad(const LoadBenchConfig& config,
                                  const RunSpec& spec, const LoadModel& model,
                                  std::vector<WorkerPushes>* pushes);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_RUN_H_
