// Where a chunk's weights may differ from the shadow of its published pull
// deltas (published_deltas.h), so that a publication costs O(those
// positions) instead of a pass over the chunk.
//
// While known(), every element outside the set has weight == shadow (as
// floats compare), so w - shadow is zero there: Top-K of the difference
// over the chunk is Top-K over the set, whenever the set holds at least k
// non-zero differences (Top-K keeps the k largest magnitudes, ties to the
// lower index, and a zero is never larger than a non-zero). An update that
// moves the weights at a push's selected positions adds them (Add); an
// update that may move any weight (a dense push, weight decay, momentum)
// makes the set unknown (Forget), and so does a set that grows past
// numel / kMaxShare, where one streaming pass over the chunk is cheaper
// than gathering at the positions. After each publication the set is cut
// to the positions where the weight still differs from the new shadow
// (what the delta left out: the server-side error feedback), which a
// publication computes from the set when it is known, or from a pass over
// the chunk every kRescanEvery publications while it is not.
//
// Thread safety: none; the chunk's mutex guards it. Not part of snapshots:
// a restored chunk starts unknown.
#ifndef GRADWIRE_SERVER_SHARD_CHANGED_POSITIONS_H_
#define GRADWIRE_SERVER_SHARD_CHANGED_POSITIONS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace gradwire {

class ChangedPositions {
 public:
  // Beyond numel / kMaxShare positions the set is dropped (unknown).
  static constexpr uint64_t kMaxShare = 8;
  // While unknown, a publication rescans the chunk once in this many.
  static constexpr uint64_t kRescanEvery = 8;

  // Known and empty when weights == shadow everywhere; unknown otherwise.
  // O(numel).
  void ResetFrom(absl::Span<const float> weights,
                 absl::Span<const float> shadow);

  bool known() const { return known_; }
  // The set is unknown until the next rescan finds it.
  void Forget();

  // The weights at `positions` (each < numel, repeats allowed) may have
  // moved. No-op while unknown; past numel / kMaxShare, Forget.
  void Add(absl::Span<const uint32_t> positions, uint64_t numel);

  // The set, sorted, without repeats. Precondition: known().
  absl::Span<const uint32_t> Sorted();

  // After a publication moved the shadow: keeps the positions where the
  // weight still differs from it when known (O(set)); while unknown, once
  // in kRescanEvery calls, finds them with a pass over the chunk (known
  // again unless there are more than numel / kMaxShare).
  void AfterPublish(absl::Span<const float> weights,
                    absl::Span<const float> shadow);

 private:
  bool known_ = false;
  // Positions appended since the last Sorted().
  bool sorted_ = true;
  uint64_t publications_unknown_ = 0;
  std::vector<uint32_t> positions_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CHANGED_POSITIONS_H_
