#include "server/shard/published_deltas.h"

#include <atomic>
#include <utility>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/registry.h"

namespace gradwire {
namespace {

// The sequence of the next kept delta, of any chunk.
std::atomic<uint64_t> next_sequence{1};

}  // namespace

void PublishedDeltas::Reset(uint64_t version, uint64_t clock) {
  kept_.clear();
  version_ = version;
  clock_ = clock;
}

bool PublishedDeltas::Publish(const Compressor& compressor, uint64_t chunk_key,
                              uint64_t version, uint64_t clock,
                              absl::Span<const float> weights,
                              absl::Span<float> shadow,
                              ChangedPositions* changed) {
  thread_local CompressedChunk delta;
  CompressContext context;
  context.chunk_key = chunk_key;
  context.step = version;
  v1::ChunkData data;
  if (!CompressDelta(compressor, context, weights, shadow, changed, &delta)
           .ok() ||
      !EncodeChunk(delta, &data).ok()) {
    return false;
  }
  AccumulateInto(delta, 1.0f, shadow);
  if (changed != nullptr) changed->AfterPublish(weights, shadow);
  TrimScratch(&delta.values);
  TrimScratch(&delta.indices);
  if (kept_.size() == kMaxKept) kept_.erase(kept_.begin());
  const uint64_t bytes = data.SpaceUsedLong();
  MemoryLease lease = ReserveForDelta(bytes);
  if (budget_ == nullptr || lease.bytes() == bytes) {
    kept_.push_back(Delta{version_, version,
                          next_sequence.fetch_add(1, std::memory_order_relaxed),
                          std::move(data), std::move(lease)});
  }
  version_ = version;
  clock_ = clock;
  return true;
}

const Compressor* PublishedDeltas::ExactKCompressor(
    const Compressor& compressor, uint64_t numel) {
  if (!exact_k_made_) {
    exact_k_made_ = true;
    if (compressor.name() == "topk") {
      CompressorOptions options = compressor.options();
      options.k = KeptCount(options, numel);
      absl::StatusOr<std::unique_ptr<Compressor>> made =
          MakeCompressor(options);
      if (made.ok()) exact_k_ = *std::move(made);
    }
  }
  return exact_k_.get();
}

absl::Status PublishedDeltas::CompressDelta(const Compressor& compressor,
                                            const CompressContext& context,
                                            absl::Span<const float> weights,
                                            absl::Span<const float> shadow,
                                            ChangedPositions* changed,
                                            CompressedChunk* delta) {
  const Compressor* exact_k = changed != nullptr && changed->known()
                                  ? ExactKCompressor(compressor, weights.size())
                                  : nullptr;
  if (exact_k != nullptr) {
    // The two sides at the positions, gathered; the pass's own
    // subtraction then runs on them.
    thread_local std::vector<float> a;
    thread_local std::vector<float> b;
    const absl::Span<const uint32_t> positions = changed->Sorted();
    a.resize(positions.size());
    b.resize(positions.size());
    uint64_t differing = 0;
    for (size_t j = 0; j < positions.size(); ++j) {
      a[j] = weights[positions[j]];
      b[j] = shadow[positions[j]];
      differing += a[j] != b[j];  // Finite: a - b == 0 exactly when equal.
    }
    if (differing >= *exact_k->options().k &&
        exact_k->CompressDifference(a, b, context, delta).ok()) {
      for (uint32_t& index : delta->indices) index = positions[index];
      delta->numel = weights.size();
      ++lazy_publications_;
      return absl::OkStatus();
    }
  }
  ++full_publications_;
  // Top-K finds its candidates while it subtracts: no pass writes the
  // difference and none reads it back.
  return compressor.CompressDifference(weights, shadow, context, delta);
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

void PublishedDeltas::AppendKeptSequences(
    std::vector<uint64_t>* sequences) const {
  for (const Delta& delta : kept_) sequences->push_back(delta.sequence);
}

uint64_t PublishedDeltas::DropKeptThrough(uint64_t sequence) {
  size_t dropped = 0;
  uint64_t released = 0;
  while (dropped < kept_.size() && kept_[dropped].sequence <= sequence) {
    released += kept_[dropped].lease.bytes();
    ++dropped;
  }
  kept_.erase(kept_.begin(), kept_.begin() + dropped);
  return released;
}

}  // namespace gradwire
