// Shared pull deltas: what a chunk publishes for every delta-pulling worker.
//
// A chunk with a pull compressor keeps `shadow` (ChunkSnapshot), the
// weights every worker on deltas holds. Publishing compresses
// d = C(w - shadow), adds D(d) to shadow and records d, encoded once, as
// the delta from the version the shadow had to the chunk's version now.
// What d leaves out stays in w - shadow and goes out later (server-side
// error feedback). A worker that holds a published version gets the deltas
// from it to the newest, in order; any other gets the dense shadow.
//
// When a chunk publishes is the shard's choice (chunk_updater.h,
// shard_pull.cc): BSP at every update; ASP and SSP every `publish_every`
// updates, so that one compression serves the workers that pull in
// between, and at a pull that needs newer weights than the last
// publication.
//
// Memory: each kept delta holds a lease on the shard's MemoryBudget
// (memory_budget.h) for its encoded bytes. Kept deltas are a cache: a
// worker whose version no kept delta starts from gets the dense shadow,
// which is always correct, only larger. So when the budget is short of
// room, they are what goes first: the shard's reclaimer drops the oldest
// kept deltas of any chunk (DropKeptThrough, by the publication sequence
// every delta carries), and Publish, when even that leaves no room, drops
// this chunk's oldest until the new delta fits (or none is left, and the
// new one is not kept either) rather than refuse the publication: the
// shadow still moves. Without a budget (set_budget never called) nothing
// is counted.
//
// Thread safety: none; the chunk's mutex guards it.
#ifndef GRADWIRE_SERVER_SHARD_PUBLISHED_DELTAS_H_
#define GRADWIRE_SERVER_SHARD_PUBLISHED_DELTAS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/compress/compressor.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/changed_positions.h"
#include "server/shard/memory_budget.h"

namespace gradwire {

class PublishedDeltas {
 public:
  // The most deltas kept: a worker further behind than that many
  // publications gets the dense shadow.
  static constexpr size_t kMaxKept = 8;

  // Where kept deltas reserve their bytes; null counts nothing. `budget`
  // must outlive this object. Set it before the first Publish.
  void set_budget(MemoryBudget* budget) { budget_ = budget; }

  // No deltas; the shadow is at `version`, published at `clock`.
  void Reset(uint64_t version, uint64_t clock);

  // The version the shadow is at: the newest publication's.
  uint64_t version() const { return version_; }
  // The chunk's clock when the shadow was last published or reset.
  uint64_t clock() const { return clock_; }

  // Publishes (see above): with `weights` at `version` and `clock`,
  // compresses weights - *shadow (chunk_key and version seed the
  // compressor), adds what was sent to *shadow and keeps the encoded
  // delta (see "Memory" above). Returns false and changes nothing when the
  // compressor refuses the difference (non-finite, which finite weights never
  // give) or the delta does not encode.
  //
  // With `changed` set (the positions where weights may differ from
  // shadow, changed_positions.h) and a Top-K compressor, the difference is
  // compressed at those positions alone when they are known and hold at
  // least k non-zero differences: O(positions), and the same delta, bit
  // for bit, as the pass over the chunk (Top-K keeps the k largest
  // magnitudes, ties to the lower index; every difference elsewhere is
  // zero). Otherwise the pass decides. Either way `changed` is then cut
  // to what the delta left out (ChangedPositions::AfterPublish).
  bool Publish(const Compressor& compressor, uint64_t chunk_key,
               uint64_t version, uint64_t clock,
               absl::Span<const float> weights, absl::Span<float> shadow,
               ChangedPositions* changed = nullptr);

  // Publications whose delta was compressed at the changed positions
  // alone, and by a pass over the chunk.
  uint64_t lazy_publications() const { return lazy_publications_; }
  uint64_t full_publications() const { return full_publications_; }

  // The deltas from `have_version` to version(), oldest first, into
  // *chain; false (and *chain empty) when `have_version` is not a version
  // a kept delta starts from. Pointers stay valid until the next Publish
  // or Reset.
  bool ChainFrom(uint64_t have_version,
                 std::vector<const v1::ChunkData*>* chain) const;

  // Encoded bytes of the kept deltas.
  uint64_t bytes() const;

  // The publication sequence of each kept delta, oldest first, appended to
  // *sequences. Sequences grow with every kept delta of any chunk in the
  // process, so they order the deltas of different chunks by age.
  void AppendKeptSequences(std::vector<uint64_t>* sequences) const;
  // Drops the kept deltas of sequence at most `sequence` (the oldest ones),
  // releasing their leases; returns the bytes released from the budget.
  uint64_t DropKeptThrough(uint64_t sequence);

 private:
  struct Delta {
    uint64_t from = 0;
    uint64_t to = 0;
    // Its place in the order of every kept delta (AppendKeptSequences).
    uint64_t sequence = 0;
    v1::ChunkData data;
    // Its bytes in the budget.
    MemoryLease lease;
  };

  // The delta of weights - shadow into *delta, at the changed positions
  // when that gives the pass's result (see Publish), else by the pass.
  absl::Status CompressDelta(const Compressor& compressor,
                             const CompressContext& context,
                             absl::Span<const float> weights,
                             absl::Span<const float> shadow,
                             ChangedPositions* changed, CompressedChunk* delta);
  // The Top-K compressor that keeps k(numel) elements of any input (k set
  // to what `compressor` keeps of numel), made on first use; null when
  // `compressor` is not Top-K.
  const Compressor* ExactKCompressor(const Compressor& compressor,
                                     uint64_t numel);

  // Reserves `bytes` for a new delta, dropping the oldest kept ones while
  // the budget refuses; an empty lease when even an empty list does not
  // leave room (or there is no budget).
  MemoryLease ReserveForDelta(uint64_t bytes);

  // Oldest first. A vector, not a deque: an empty one allocates nothing,
  // and chunks that never publish (dense pulls) are most chunks of a shard.
  std::vector<Delta> kept_;
  uint64_t version_ = 0;
  uint64_t clock_ = 0;
  MemoryBudget* budget_ = nullptr;
  std::unique_ptr<Compressor> exact_k_;
  bool exact_k_made_ = false;
  uint64_t lazy_publications_ = 0;
  uint64_t full_publications_ = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_PUBLISHED_DELTAS_H_
