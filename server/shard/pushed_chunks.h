// The first phase of a Push, without locks: each chunk of the request is
// matched to the chunk it updates and decoded in full (numel, encoding,
// indices, finiteness), so that nothing is applied unless all of it can be.
// Internal to server/shard/.
#ifndef GRADWIRE_SERVER_SHARD_PUSHED_CHUNKS_H_
#define GRADWIRE_SERVER_SHARD_PUSHED_CHUNKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/codec/push_wire.h"
#include "common/compress/compressed_chunk.h"
#include "common/consistency/consistency_rule.h"
#include "common/threads/thread_pool.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/chunk_state.h"
#include "server/shard/chunk_updater.h"
#include "server/shard/memory_budget.h"
#include "server/shard/shard_metrics.h"

namespace gradwire {

// One chunk of a push, matched and decoded.
struct PushedChunk {
  // Its place in the request, and so of its ack in the response.
  int request_index = 0;
  // The chunk it updates; owned by the shard.
  ChunkState* chunk = nullptr;
  CompressedChunk gradient;
  // The consistency rule's verdict, set under the chunk's lock.
  PushVerdict verdict = PushVerdict::kApply;
  // The optimizer update the push makes, prepared under the chunk's lock
  // (ChunkUpdater::PreparePush) when the verdict is kApply.
  PreparedUpdate update;
  // The decoded gradient's bytes in the shard's memory budget, reserved
  // before it was decoded and given back with the PushedChunk: after the
  // push is applied (or refused) and its chunk locks are released.
  MemoryLease lease;
};

// An upper bound on the bytes DecodeChunk allocates for `gradient`, a chunk
// of `numel` elements (it refuses any other numel): values, indices,
// quantization levels, sign bits and bucket scales. Read from the
// encoding's header fields, without decoding.
uint64_t DecodedBytes(const ChunkDataView& gradient, uint64_t numel);

// Decodes every chunk of `request` against `chunks` (the chunks of shard
// `shard_id`) into `*pushed`, sorted by key (the lock order). On a refusal
// sets *outcome: kInvalid (INVALID_ARGUMENT: more entries than `chunks`,
// checked before any per-entry work; a chunk twice; or one that does not
// decode) or kNotOwned (FAILED_PRECONDITION: a chunk this shard does not
// hold) or kOverBudget (RESOURCE_EXHAUSTED: `budget` refused the decoded
// size of a chunk, checked before that chunk is decoded; memory_budget.h).
// The error names the chunk. `budget` may be null (nothing counted).
// With `pool` set, a push of two or more chunks whose decoded size is at
// least kParallelApplyElements floats is decoded on its threads too (the
// calling thread works as well); the result and the error, the first in
// the request's order, are those of one thread.
absl::Status DecodePushedChunks(const PushView& request, const ChunkMap& chunks,
                                uint32_t shard_id, MemoryBudget* budget,
                                ThreadPool* pool,
                                std::vector<PushedChunk>* pushed,
                                PushOutcome* outcome);
// Gives the decoded gradients of `pushed` back to this thread's pool, which
// DecodePushedChunks decodes the next push into: their buffers are then
// reused at their size instead of allocated and zero-filled again (a dense
// chunk is megabytes). The pool keeps at most kPooledGradientBytes per
// thread, and no buffer larger than kRetainedScratchBytes: a rare huge
// chunk is freed rather than pinned on the thread. Pooled buffers are not
// counted in the budget while idle (at most 8 MiB per thread); while a push
// uses one, its lease counts it. Gives back every lease of `pushed`.
void RecyclePushedChunks(std::vector<PushedChunk>* pushed);
inline constexpr size_t kPooledGradientBytes = size_t{8} << 20;

// The chunks of `pushed`, in its order.
std::vector<ChunkState*> ChunksOf(const std::vector<PushedChunk>& pushed);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_PUSHED_CHUNKS_H_
