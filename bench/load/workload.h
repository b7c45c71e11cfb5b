// The traffic of gradwire-bench-load, built before anything is timed: the
// model's partition, each shard's Init, and every simulated worker's
// compressed pushes.
#ifndef GRADWIRE_BENCH_LOAD_WORKLOAD_H_
#define GRADWIRE_BENCH_LOAD_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/load/config.h"
#include "common/partition/partition.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

struct LoadModel {
  std::unique_ptr<Partition> partition;
  // One Init per shard (index = shard id) for worker 0, with the job's
  // config and the shard's chunks at zero; a worker sends it with its own
  // worker_id.
  std::vector<v1::InitRequest> inits;
};

// A worker's pushes: variants[v][shard] is the PushRequest of gradient v for
// that shard (every chunk the shard owns, Top-K with error feedback, encoded
// by the wire codec), with the worker's id and step 0. The worker sets the
// step before each send.
struct WorkerPushes {
  std::vector<std::vector<v1::PushRequest>> variants;
};

// Partitions config.params parameters (one tensor) over config.shards and
// builds the Inits: SGD, the mode, staleness and pull encoding of `config`.
// INVALID_ARGUMENT when the model has fewer chunks than shards (a shard
// would own nothing).
absl::StatusOr<LoadModel> BuildLoadModel(const LoadBenchConfig& config);

// Every worker's pushes: for worker w, config.distinct_gradients pseudo-random
// gradients (uniform in [-1, 1), distinct per seed, worker and variant) run
// through one error-feedback state per chunk, in order. Built on several
// threads; the first error wins.
absl::StatusOr<std::vector<WorkerPushes>> BuildAllPushes(
    const LoadBenchConfig& config, const Partition& partition);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_WORKLOAD_H_
