#include "server/shard/pushed_chunks.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "server/shard/shard_options.h"

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

namespace {

// The first refusal that the per-entry checks before decoding found.
struct EarlyRefusal {
  absl::Status status;
  PushOutcome outcome = PushOutcome::kInvalid;
};

// In the request's order, up to the first refusal: the repeat check, the
// budget's lease and a buffer from this thread's pool for each entry.
// Returns how many entries passed (all of them, or up to the refused one,
// whose refusal goes to *refused); *decoded_bytes is what they will decode
// to.
size_t ReserveInOrder(const PushView& request, const ChunkMap& chunks,
                      MemoryBudget* budget, std::vector<PushedChunk>* pushed,
                      uint64_t* decoded_bytes, EarlyRefusal* refused) {
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(request.chunks.size());
  size_t ready = 0;
  for (; ready < request.chunks.size(); ++ready) {
    const ChunkGradientView& chunk = request.chunks[ready];
    if (!seen.insert(chunk.key).second) {
      refused->status = absl::InvalidArgumentError(
          absl::StrFormat("chunk %d appears twice in one push", chunk.key));
      break;
    }
    PushedChunk& item = (*pushed)[ready];
    item.request_index = static_cast<int>(ready);
    if (absl::Status s = ReserveDecoded(chunk, chunks, budget, &item.lease);
        !s.ok()) {
      refused->status = std::move(s);
      refused->outcome = PushOutcome::kOverBudget;
      break;
    }
    const auto it = chunks.find(chunk.key);
    if (it != chunks.end()) {
      *decoded_bytes += DecodedBytes(chunk.gradient, it->second->numel);
    }
    TakeFromPool(&item.gradient);
  }
  return ready;
}

// The outcome of DecodeOne's refusal `status`.
PushOutcome DecodeOutcome(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) ? PushOutcome::kNotOwned
                                            : PushOutcome::kInvalid;
}

// Decodes the first `ready` entries into *pushed: on `pool`'s threads too
// when there are two or more and they decode to at least
// kParallelApplyElements floats, else in order on this thread, stopping at
// the first error. Returns the first error in the request's order, with
// *outcome set.
absl::Status DecodeInOrder(const PushView& request, const ChunkMap& chunks,
                           uint32_t shard_id, ThreadPool* pool, size_t ready,
                           uint64_t decoded_bytes,
                           std::vector<PushedChunk>* pushed,
                           PushOutcome* outcome) {
  const auto decode = [&](size_t i) {
    PushedChunk& item = (*pushed)[i];
    return DecodeOne(request.chunks[i], chunks, shard_id, &item.chunk,
                     &item.gradient);
  };
  if (pool == nullptr || ready < 2 ||
      decoded_bytes < kParallelApplyElements * sizeof(float)) {
    for (size_t i = 0; i < ready; ++i) {
      if (absl::Status s = decode(i); !s.ok()) {
        *outcome = DecodeOutcome(s);
        return s;
      }
    }
    return absl::OkStatus();
  }
  std::vector<absl::Status> decoded(ready);
  pool->ParallelFor(ready, [&](size_t i) { decoded[i] = decode(i); });
  for (const absl::Status& s : decoded) {
    if (s.ok()) continue;
    *outcome = DecodeOutcome(s);
    return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodePushedChunks(const PushView& request, const ChunkMap& chunks,
                                uint32_t shard_id, MemoryBudget* budget,
                                ThreadPool* pool,
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
  // The entries before a refusal are decoded first, as one pass in order
  // would, so that an earlier entry's decoding error is the one returned.
  uint64_t decoded_bytes = 0;
  EarlyRefusal refused;
  const size_t ready =
      ReserveInOrder(request, chunks, budget, pushed, &decoded_bytes, &refused);
  if (absl::Status s = DecodeInOrder(request, chunks, shard_id, pool, ready,
                                     decoded_bytes, pushed, outcome);
      !s.ok()) {
    return s;
  }
  if (!refused.status.ok()) {
    *outcome = refused.outcome;
    return refused.status;
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
