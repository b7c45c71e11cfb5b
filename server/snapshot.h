// The complete state of a shard as plain data: what a checkpoint stores and
// what a restarted shard resumes from.
#ifndef GRADWIRE_SERVER_SNAPSHOT_H_
#define GRADWIRE_SERVER_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/optimizer.h"

namespace gradwire {

// Which steps of one worker a chunk has accounted for: every step below
// `next_step`, plus step next_step + 1 + i when bit i of `ahead_bits` is set
// (pushes that arrived out of order in ASP/SSP).
struct WorkerProgress {
  uint64_t next_step = 0;
  uint64_t ahead_bits = 0;

  friend bool operator==(const WorkerProgress& a, const WorkerProgress& b) {
    return a.next_step == b.next_step && a.ahead_bits == b.ahead_bits;
  }
};

struct ChunkSnapshot {
  uint64_t key = 0;
  std::string tensor_name;
  uint64_t offset = 0;
  uint64_t numel = 0;
  // Optimizer updates applied.
  uint64_t version = 0;
  // Steps every worker has pushed and the chunk has applied.
  uint64_t clock = 0;
  std::vector<float> weights;
  OptimizerState optimizer;
  // BSP: the sum of the pushes of step `clock` received so far, already
  // divided by the number of workers, and how many workers they came from.
  std::vector<float> accumulator;
  uint32_t pending_pushes = 0;
  // One entry per worker id.
  std::vector<WorkerProgress> workers;
  // Delta pulls: the weights workers hold (empty when deltas are off).
  std::vector<float> shadow;
};

struct ShardSnapshot {
  uint32_t shard_id = 0;
  uint32_t num_shards = 0;
  // The accepted Init's TrainingConfig, serialized (gradwire.v1).
  std::string training_config;
  // Sorted by key.
  std::vector<ChunkSnapshot> chunks;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SNAPSHOT_H_
