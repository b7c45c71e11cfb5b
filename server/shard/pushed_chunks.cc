#include "server/shard/pushed_chunks.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/codec/codec.h"

namespace gradwire {
namespace {

// Matches one pushed chunk to its chunk and decodes it into `*gradient`:
// FAILED_PRECONDITION when this shard does not own it, INVALID_ARGUMENT when
// it does not decode.
absl::Status DecodeOne(const v1::ChunkGradient& pushed, const ChunkMap& chunks,
                       uint32_t shard_id, ChunkState** chunk,
                       CompressedChunk* gradient) {
  const auto it = chunks.find(pushed.key());
  if (it == chunks.end()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d is not owned by shard %d", pushed.key(), shard_id));
  }
  *chunk = it->second.get();
  DecodeOptions decode;
  decode.expected_numel = (*chunk)->numel;
  if (absl::Status s = DecodeChunk(pushed.gradient(), decode, gradient);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d: %s", pushed.key(), s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodePushedChunks(const v1::PushRequest& request,
                                const ChunkMap& chunks, uint32_t shard_id,
                                std::vector<PushedChunk>* pushed,
                                PushOutcome* outcome) {
  // First, before anything is allocated per entry: a push of millions of
  // (empty) entries must cost no more than one naming every chunk.
  if (static_cast<uint64_t>(request.chunks_size()) > chunks.size()) {
    *outcome = PushOutcome::kInvalid;
    return absl::InvalidArgumentError(
        absl::StrFormat("push names %d chunks; shard %d owns %d",
                        request.chunks_size(), shard_id, chunks.size()));
  }
  pushed->assign(request.chunks_size(), PushedChunk());
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(request.chunks_size());
  for (int i = 0; i < request.chunks_size(); ++i) {
    const v1::ChunkGradient& chunk = request.chunks(i);
    if (!seen.insert(chunk.key()).second) {
      *outcome = PushOutcome::kInvalid;
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d appears twice in one push", chunk.key()));
    }
    PushedChunk& item = (*pushed)[i];
    item.request_index = i;
    if (absl::Status s =
            DecodeOne(chunk, chunks, shard_id, &item.chunk, &item.gradient);
        !s.ok()) {
      *outcome = absl::IsFailedPrecondition(s) ? PushOutcome::kNotOwned
                                               : PushOutcome::kInvalid;
      return s;
    }
  }
  std::sort(pushed->begin(), pushed->end(),
            [](const PushedChunk& a, const PushedChunk& b) {
              return a.chunk->key < b.chunk->key;
            });
  return absl::OkStatus();
}

std::vector<ChunkState*> ChunksOf(const std::vector<PushedChunk>& pushed) {
  std::vector<ChunkState*> chunks;
  chunks.reserve(pushed.size());
  for (const PushedChunk& item : pushed) chunks.push_back(item.chunk);
  return chunks;
}

}  // namespace gradwire
