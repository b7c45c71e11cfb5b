#include "server/shard/changed_positions.h"

#include <algorithm>

namespace gradwire {
namespace {

// Positions where weights[i] != shadow[i] into *out; false (and *out
// cleared) as soon as there are more than `limit`.
bool CollectDiffering(absl::Span<const float> weights,
                      absl::Span<const float> shadow, uint64_t limit,
                      std::vector<uint32_t>* out) {
  out->clear();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == shadow[i]) continue;
    if (out->size() == limit) {
      out->clear();
      return false;
    }
    out->push_back(static_cast<uint32_t>(i));
  }
  return true;
}

}  // namespace

void ChangedPositions::ResetFrom(absl::Span<const float> weights,
                                 absl::Span<const float> shadow) {
  publications_unknown_ = 0;
  sorted_ = true;
  known_ = weights.size() == shadow.size() &&
           CollectDiffering(weights, shadow, weights.size() / kMaxShare,
                            &positions_);
}

void ChangedPositions::Forget() {
  known_ = false;
  positions_.clear();
}

void ChangedPositions::Add(absl::Span<const uint32_t> positions,
                           uint64_t numel) {
  if (!known_) return;
  if (positions_.size() + positions.size() > numel / kMaxShare) {
    Forget();
    return;
  }
  positions_.insert(positions_.end(), positions.begin(), positions.end());
  sorted_ = false;
}

absl::Span<const uint32_t> ChangedPositions::Sorted() {
  if (!sorted_) {
    std::sort(positions_.begin(), positions_.end());
    positions_.erase(std::unique(positions_.begin(), positions_.end()),
                     positions_.end());
    sorted_ = true;
  }
  return positions_;
}

void ChangedPositions::AfterPublish(absl::Span<const float> weights,
                                    absl::Span<const float> shadow) {
  if (known_) {
    Sorted();
    const auto same = [&](uint32_t i) { return weights[i] == shadow[i]; };
    positions_.erase(std::remove_if(positions_.begin(), positions_.end(), same),
                     positions_.end());
    return;
  }
  if (++publications_unknown_ < kRescanEvery) return;
  ResetFrom(weights, shadow);
}

}  // namespace gradwire
