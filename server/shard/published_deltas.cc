#include "server/shard/published_deltas.h"

#include <utility>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"

namespace gradwire {

void PublishedDeltas::Reset(uint64_t version, uint64_t clock) {
  kept_.clear();
  version_ = version;
  clock_ = clock;
}

bool PublishedDeltas::Publish(const Compressor& compressor, uint64_t chunk_key,
                              uint64_t version, uint64_t clock,
                              absl::Span<const float> weights,
                              absl::Span<float> shadow) {
  thread_local CompressedChunk delta;
  CompressContext context;
  context.chunk_key = chunk_key;
  context.step = version;
  v1::ChunkData data;
  // Top-K finds its candidates while it subtracts: no pass writes the
  // difference and none reads it back.
  if (!compressor.CompressDifference(weights, shadow, context, &delta).ok() ||
      !EncodeChunk(delta, &data).ok()) {
    return false;
  }
  AccumulateInto(delta, 1.0f, shadow);
  TrimScratch(&delta.values);
  TrimScratch(&delta.indices);
  if (kept_.size() == kMaxKept) kept_.erase(kept_.begin());
  const uint64_t bytes = data.SpaceUsedLong();
  MemoryLease lease = ReserveForDelta(bytes);
  if (budget_ == nullptr || lease.bytes() == bytes) {
    kept_.push_back(
        Delta{version_, version, std::move(data), std::move(lease)});
  }
  version_ = version;
  clock_ = clock;
  return true;
}

MemoryLease PublishedDeltas::ReserveForDelta(uint64_t bytes) {
  if (budget_ == nullptr) return MemoryLease();
  while (true) {
    absl::StatusOr<MemoryLease> lease =
        budget_->Reserve(bytes, "kept pull delta");
    if (lease.ok()) return *std::move(lease);
    if (kept_.empty()) return MemoryLease();
    kept_.erase(kept_.begin());
  }
}

bool PublishedDeltas::ChainFrom(
    uint64_t have_version, std::vector<const v1::ChunkData*>* chain) const {
  chain->clear();
  size_t first = 0;
  while (first < kept_.size() && kept_[first].from != have_version) ++first;
  if (first == kept_.size()) return false;
  for (size_t i = first; i < kept_.size(); ++i) {
    chain->push_back(&kept_[i].data);
  }
  return true;
}

uint64_t PublishedDeltas::bytes() const {
  uint64_t total = 0;
  for (const Delta& delta : kept_) total += delta.data.ByteSizeLong();
  return total;
}

}  // namespace gradwire
