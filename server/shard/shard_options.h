// What a shard is told at start-up, from the server's flags
// (server/process/server_options.h): its place in the job, the bounds it
// enforces and how it spends memory and threads. Init must agree with
// every field of the job's identity that is set.
#ifndef GRADWIRE_SERVER_SHARD_SHARD_OPTIONS_H_
#define GRADWIRE_SERVER_SHARD_SHARD_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/init_election.h"

namespace gradwire {

// Where ASP/SSP pull deltas come from (BSP always shares one per update).
enum class AsyncPullDeltas {
  // The chunk's published deltas, shared by every worker
  // (published_deltas.h): one compression per publication.
  kShared,
  // A replica per worker and a compression per pull (worker_replicas.h):
  // the freshest weights, at the cost of a pass over the chunk per pull.
  kPerWorker,
};

// Fixed at start-up (from flags). Init must agree with every field that is
// set.
struct ShardOptions {
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  // Workers expected; 0 accepts the number Init declares.
  uint32_t num_workers = 0;
  // Consistency mode; UNSPECIFIED accepts the mode Init declares.
  v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_UNSPECIFIED;
  // SSP staleness when `mode` is set.
  uint32_t staleness = 0;
  // Largest element count one declared chunk may have.
  uint64_t max_chunk_numel = uint64_t{1} << 28;
  // Most chunks one Init may declare (the server's --max-chunks). At 4 MiB
  // chunks the default holds 64 GiB on one shard; real models have at most
  // a few thousand tensors.
  uint64_t max_chunks = 16384;
  // Most bytes a first Init may make the shard allocate beyond the model
  // data it carries (the server's --max-init-overhead-bytes): chunk
  // bookkeeping and every worker's progress in every chunk, estimated from
  // the request by EstimateInitOverheadBytes (init_budget.h).
  uint64_t max_init_overhead_bytes = uint64_t{64} << 20;
  // Largest answer a Pull may build, in bytes (the server's
  // --max-message-bytes, which gRPC would refuse to send anyway): a pull
  // whose answer would be larger is RESOURCE_EXHAUSTED before it is built.
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // ASP/SSP with delta pulls: shared published deltas or per-worker
  // replicas (the server's --async-pull-deltas).
  AsyncPullDeltas async_pull_deltas = AsyncPullDeltas::kShared;
  // Shared ASP/SSP deltas: optimizer updates between two publications of a
  // chunk (the server's --async-publish-every); 0 leaves it to the job's
  // worker count (DefaultPublishEvery, shard_config.h).
  uint64_t async_publish_every = 0;
  // Most bytes of per-worker replicas the shard keeps for ASP/SSP pull
  // deltas (the server's --max-replica-bytes; worker_replicas.h). Workers
  // beyond it get dense pulls.
  uint64_t max_replica_bytes = uint64_t{1} << 30;
  // The shard's history epoch (shard.h); 0, the default, draws a random
  // non-zero one at construction, as a server process must. Tests set it to
  // get answers they can compare.
  uint64_t history_epoch = 0;
  // Most bytes the shard holds at once in decoded pushes, pull answers being
  // built and kept pull deltas (the server's --memory-budget-bytes;
  // memory_budget.h). A push or pull that would pass it is
  // RESOURCE_EXHAUSTED with nothing changed; a publication that would pass
  // it drops the chunk's oldest kept deltas instead (published_deltas.h).
  uint64_t memory_budget_bytes = uint64_t{4} << 30;
  // Most bytes the shard process may hold in all (the server's
  // --memory-limit-bytes; by default its cgroup's memory limit, else the
  // host's memory): a first Init whose model state (ModelStateBytes,
  // init_budget.h) leaves less than two messages' room under it is refused
  // at start-up with the sizes, instead of an out-of-memory kill mid-run.
  // 0: no limit.
  uint64_t memory_limit_bytes = 0;
  // Whether checkpoints are written: a checkpoint copies the whole state
  // (Shard::Snapshot) while it is written, so the model state counts twice
  // against memory_limit_bytes.
  bool checkpoints = false;
  // How long a worker elected to send the initial values has before the
  // next worker without values is elected instead (the server's
  // --init-values-timeout; init_election.h); > 0. Long enough to send one
  // copy of the shard's chunks over the slowest link of the job.
  absl::Duration init_values_timeout = absl::Seconds(60);
  // How long after the first valueless Init the worker this shard prefers
  // to send its values is waited for (--init-preferred-grace-seconds;
  // init_election.h); >= 0, at most init_values_timeout counts.
  absl::Duration init_preferred_grace = InitElection::kPreferredGrace;
  // Threads besides the calling one that prepare and apply the chunks of
  // one push (the server's --apply-threads): a worker sends every chunk it
  // pushes to a shard in one request, and their updates touch nothing in
  // common. Only a push of two or more chunks carrying at least
  // kParallelApplyElements elements (selected or dense) uses them; smaller
  // ones cost less than the hand-over. -1: one less than the cores this
  // process may run on (UsableCpus); 0: the calling thread alone.
  int apply_threads = -1;
};

// See ShardOptions::apply_threads.
inline constexpr uint64_t kParallelApplyElements = 64 * 1024;

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SHARD_OPTIONS_H_
