// The complete state of a shard as plain data: what a checkpoint stores
// (server/durability/checkpoint_format.h) and what a restarted shard resumes
// from (Shard::Restore). Shard::Restore refuses (INVALID_ARGUMENT) a
// snapshot whose float arrays hold a NaN or an infinity. WorkerProgress, the
// per-worker step record, is the consistency rules'
// (common/consistency/worker_progress.h).
#ifndef GRADWIRE_SERVER_SHARD_SNAPSHOT_H_
#define GRADWIRE_SERVER_SHARD_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/consistency/live_set.h"
#include "common/consistency/worker_progress.h"
#include "server/shard/optimizer.h"

namespace gradwire {

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
  // The workers this chunk waits for: Shard::DropWorker takes a worker out
  // of every chunk's set, a push the chunk applies or an Init puts it back.
  // As many workers as `workers`.
  LiveSet live{0};
};

struct ShardSnapshot {
  uint32_t shard_id = 0;
  uint32_t num_shards = 0;
  // The accepted Init's TrainingConfig, serialized (gradwire.v1).
  std::string training_config;
  // Sorted by key.
  std::vector<ChunkSnapshot> chunks;
  // The sequence number of the last journal record (shard_journal.h) this
  // state holds, 0 when it holds none: a replay of the write-ahead log over
  // it applies only the records after it. Absent in a checkpoint of format
  // version 1, which did not record it.
  std::optional<uint64_t> journal_sequence;
  // Workers that rejoined by Init and have had no push applied since: a
  // second drop then leaves them out until a push (shard.h). Ascending.
  std::vector<uint32_t> revived_by_init;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SNAPSHOT_H_
