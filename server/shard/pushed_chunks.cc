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
absl::Status DecodeOne(const ChunkGradientView& pushed, const ChunkMap& chunks,
                       uint32_t shard_id, ChunkState** chunk,
                       CompressedChunk* gradient) {
  const auto it = chunks.find(pushed.key);
  if (it == chunks.end()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d is not owned by shard %d", pushed.key, shard_id));
  }
  *chunk = it->second.get();
  DecodeOptions decode;
  decode.expected_numel = (*chunk)->numel;
  if (absl::Status s = DecodeChunk(pushed.gradient, decode, gradient);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d: %s", pushed.key, s.message()));
  }
  return absl::OkStatus();
}

// This thread's decoded gradients, kept between pushes.
struct GradientPool {
  std::vector<CompressedChunk> chunks;
  size_t bytes = 0;
};

GradientPool& Pool() {
  thread_local GradientPool pool;
  return pool;
}

size_t BufferBytes(const CompressedChunk& chunk) {
  return chunk.values.capacity() * sizeof(float) +
         chunk.indices.capacity() * sizeof(uint32_t) +
         chunk.levels.capacity() * sizeof(uint16_t) +
         (chunk.negative_bits.capacity() + chunk.positive_bits.capacity()) *
             sizeof(uint64_t) +
         chunk.bucket_scales.capacity() * sizeof(float);
}

// A gradient to decode into: one from the pool when there is one.
void TakeFromPool(CompressedChunk* gradient) {
  GradientPool& pool = Pool();
  if (pool.chunks.empty()) return;
  pool.bytes -= BufferBytes(pool.chunks.back());
  *gradient = std::move(pool.chunks.back());
  pool.chunks.pop_back();
}

// Reserves the decoded size of `pushed` in `budget` (when set) into *lease;
// a chunk the shard does not own reserves nothing (DecodeOne refuses it).
absl::Status ReserveDecoded(const ChunkGradientView& pushed,
                            const ChunkMap& chunks, MemoryBudget* budget,
                            MemoryLease* lease) {
  if (budget == nullptr) return absl::OkStatus();
  const auto it = chunks.find(pushed.key);
  if (it == chunks.end()) return absl::OkStatus();
  const uint64_t bytes = DecodedBytes(pushed.gradient, it->second->numel);
  absl::StatusOr<MemoryLease> reserved = budget->Reserve(bytes, "decoded push");
  if (!reserved.ok()) {
    // The chunk named in front, with whatever the budget attached kept.
    absl::Status refused(reserved.status().code(),
                         absl::StrFormat("chunk %d: %s", pushed.key,
                                         reserved.status().message()));
    reserved.status().ForEachPayload(
        [&refused](absl::string_view url, const absl::Cord& payload) {
          refused.SetPayload(url, payload);
        });
    return refused;
  }
  *lease = *std::move(reserved);
  return absl::OkStatus();
}

}  // namespace

uint64_t DecodedBytes(const ChunkDataView& gradient, uint64_t numel) {
  const auto words = [](uint64_t n) {
    return (n + 63) / 64 * sizeof(uint64_t);
  };
  const auto scales = [numel](uint32_t bucket_size) -> uint64_t {
    if (bucket_size == 0) return 0;
    return std::min<uint64_t>((numel + bucket_size - 1) / bucket_size, numel) *
           sizeof(float);
  };
  constexpr uint64_t kSelected = sizeof(float) + sizeof(uint32_t);
  switch (gradient.payload) {
    case v1::ChunkData::kDense:
      return numel * sizeof(float);
    case v1::ChunkData::kSparse:
      return std::min(gradient.sparse.nnz, numel) * kSelected;
    case v1::ChunkData::kRandomK:
      return std::min(gradient.random_k.k, numel) * kSelected;
    case v1::ChunkData::kQsgd:
      return numel * sizeof(uint16_t) + words(numel) +
             scales(gradient.qsgd.bucket_size);
    case v1::ChunkData::kSign:
      return words(numel) + scales(gradient.sign.bucket_size);
    default:
      return 0;
  }
}

void RecyclePushedChunks(std::vector<PushedChunk>* pushed) {
  GradientPool& pool = Pool();
  for (PushedChunk& item : *pushed) {
    const size_t bytes = BufferBytes(item.gradient);
    if (bytes == 0 || bytes > kRetainedScratchBytes ||
        pool.bytes + bytes > kPooledGradientBytes) {
      continue;
    }
    pool.bytes += bytes;
    pool.chunks.push_back(std::move(item.gradient));
  }
  pushed->clear();
}

absl::Status DecodePushedChunks(const PushView& request, const ChunkMap& chunks,
                                uint32_t shard_id, MemoryBudget* budget,
                                std::vector<PushedChunk>* pushed,
                                PushOutcome* outcome) {
  // First, before anything is allocated per entry: a push of millions of
  // (empty) entries must cost no more than one naming every chunk.
  const size_t entries = request.chunks.size();
  if (entries > chunks.size()) {
    *outcome = PushOutcome::kInvalid;
    return absl::InvalidArgumentError(
        absl::StrFormat("push names %d chunks; shard %d owns %d", entries,
                        shard_id, chunks.size()));
  }
  // Not assign(): a PushedChunk holds a lease, and is not copyable.
  pushed->clear();
  pushed->resize(entries);
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(entries);
  for (size_t i = 0; i < entries; ++i) {
    const ChunkGradientView& chunk = request.chunks[i];
    if (!seen.insert(chunk.key).second) {
      *outcome = PushOutcome::kInvalid;
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d appears twice in one push", chunk.key));
    }
    PushedChunk& item = (*pushed)[i];
    item.request_index = static_cast<int>(i);
    if (absl::Status s = ReserveDecoded(chunk, chunks, budget, &item.lease);
        !s.ok()) {
      *outcome = PushOutcome::kOverBudget;
      return s;
    }
    TakeFromPool(&item.gradient);
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
