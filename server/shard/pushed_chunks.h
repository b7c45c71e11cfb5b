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
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/chunk_state.h"
#include "server/shard/chunk_updater.h"
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
};

// Decodes every chunk of `request` against `chunks` (the chunks of shard
// `shard_id`) into `*pushed`, sorted by key (the lock order). On a refusal
// sets *outcome: kInvalid (INVALID_ARGUMENT: more entries than `chunks`,
// checked before any per-entry work; a chunk twice; or one that does not
// decode) or kNotOwned (FAILED_PRECONDITION: a chunk this shard does not
// hold). The error names the chunk.
absl::Status DecodePushedChunks(const PushView& request, const ChunkMap& chunks,
                                uint32_t shard_id,
                                std::vector<PushedChunk>* pushed,
                                PushOutcome* outcome);

// Gives the decoded gradients of `pushed` back to this thread's pool, which
// DecodePushedChunks decodes the next push into: their buffers are then
// reused at their size instead of allocated and zero-filled again (a dense
// chunk is megabytes). The pool keeps at most kPooledGradientBytes.
void RecyclePushedChunks(std::vector<PushedChunk>* pushed);
inline constexpr size_t kPooledGradientBytes = size_t{64} << 20;

// The chunks of `pushed`, in its order.
std::vector<ChunkState*> ChunksOf(const std::vector<PushedChunk>& pushed);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_PUSHED_CHUNKS_H_
