// Chunking and placement: how a model's tensors are cut into chunks and which
// shard owns each chunk.
//
// A Partition is a pure function of (the model's tensor list, the options).
// Every worker and every shard builds it from the same inputs and gets the same
// chunks, keys and owners, with no coordination. Two processes agree on the
// plan exactly when they agree on plan_fingerprint().
//
// Chunking. A tensor of n float32 elements is cut into
// k = ceil(n / max_chunk_numel) chunks, where max_chunk_numel =
// partition_bytes / 4, of near-equal size (the first n % k chunks hold one
// element more). Cutting into max-size pieces plus a remainder would instead
// leave small tail chunks that cost a whole RPC each and give the placement no
// more room to balance; near-equal pieces keep every chunk large and every
// piece of one tensor interchangeable.
//
// Keys. A chunk's key is its index in the model's chunk list, ordered by tensor
// index, then by offset: keys are dense in [0, num_chunks()), and the chunks of
// one tensor have consecutive keys.
//
// Placement. Greedy longest-processing-time (LPT): chunks are taken by size
// descending (ties by key ascending), and each goes to the shard that holds
// the fewest elements so far (ties to the lowest shard id). Graham's bound
// makes the largest shard hold at most mean + max_chunk_numel elements, and
// because the chunks placed last are the smallest, the real excess is far
// smaller: on ResNet-50 (25.6M parameters, 4 MiB chunks) the largest shard
// exceeds the mean by 0.0005% at 4 shards and 0.008% at 8. Balance needs each
// shard's share to span several chunks; when the mean share nears one chunk
// (ResNet-50 at 32 shards: 1.31x), lower partition_bytes. The rule does not
// depend on hashing, the process, or the platform.
//
// Thread safety: a Partition is immutable after Build. Every method is const
// and safe to call from many threads at once. Copies are independent values.
#ifndef GRADWIRE_COMMON_PARTITION_PARTITION_H_
#define GRADWIRE_COMMON_PARTITION_PARTITION_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gradwire {

// One tensor of the model, in the order every worker lists them (e.g. the
// order of named_parameters()). Elements are float32.
struct TensorSpec {
  std::string name;    // Non-empty, unique within the model.
  uint64_t numel = 0;  // At least 1.
};

// One contiguous slice of one tensor: elements [offset, offset + numel) of
// tensors()[tensor_index].
struct ChunkSpec {
  uint64_t key = 0;  // Index in chunks(); see "Keys" above.
  uint32_t tensor_index = 0;
  uint64_t offset = 0;  // In elements, from the start of the tensor.
  uint64_t numel = 0;   // In [1, max_chunk_numel()]; fits in 32 bits.
  uint32_t shard = 0;   // Owner, in [0, num_shards).

  friend bool operator==(const ChunkSpec& a, const ChunkSpec& b) {
    return a.key == b.key && a.tensor_index == b.tensor_index &&
           a.offset == b.offset && a.numel == b.numel && a.shard == b.shard;
  }
  friend bool operator!=(const ChunkSpec& a, const ChunkSpec& b) {
    return !(a == b);
  }
};

struct PartitionOptions {
  // Largest chunk in bytes of float32. A positive multiple of 4, at most
  // 4 * (2^32 - 1) so that a chunk's element count fits in 32 bits.
  uint64_t partition_bytes = uint64_t{4} << 20;
  // Number of parameter-server shards, in [1, Partition::kMaxShards].
  uint32_t num_shards = 1;
};

class Partition {
 public:
  // Returned by ShardOf for a key that is not in the plan.
  static constexpr uint32_t kNoShard = std::numeric_limits<uint32_t>::max();
  static constexpr uint32_t kMaxShards = 1u << 16;
  // Upper bound on chunks in one plan, so that a mistaken tensor size or a
  // tiny partition_bytes gives an error instead of exhausting memory.
  static constexpr uint64_t kMaxChunks = uint64_t{1} << 24;

  // Validates the inputs and computes the plan. Fails with INVALID_ARGUMENT,
  // naming the offending option or tensor, when: num_shards is 0 or above
  // kMaxShards; partition_bytes is 0, not a multiple of 4, or above
  // 4 * (2^32 - 1); the tensor list is empty or has more than 2^32 - 1
  // tensors; a name is empty or repeated; a numel is 0; or the model would
  // have more than kMaxChunks chunks.
  static absl::StatusOr<Partition> Build(std::vector<TensorSpec> tensors,
                                         const PartitionOptions& options);

  // The inputs, as given to Build.
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const PartitionOptions& options() const { return options_; }
  uint32_t num_shards() const { return options_.num_shards; }
  uint64_t max_chunk_numel() const { return options_.partition_bytes / 4; }

  // Every chunk, indexed by key.
  absl::Span<const ChunkSpec> chunks() const { return chunks_; }
  uint64_t num_chunks() const { return chunks_.size(); }
  // Sum of all tensors' numel.
  uint64_t total_numel() const { return total_numel_; }

  // The chunk with this key, or nullptr when the key is not in the plan. The
  // pointer lives as long as this Partition.
  const ChunkSpec* FindChunk(uint64_t key) const;
  // Owner of `key`, or kNoShard when the key is not in the plan.
  uint32_t ShardOf(uint64_t key) const;
  // Whether `shard` owns `key`: the check a shard makes before accepting a
  // push or pull. False for unknown keys and out-of-range shards.
  bool Owns(uint32_t shard, uint64_t key) const {
    return shard < num_shards() && ShardOf(key) == shard;
  }

  // The chunks `shard` owns, by key ascending. Empty when the shard owns
  // nothing (more shards than chunks) or when shard >= num_shards().
  absl::Span<const ChunkSpec> ChunksOfShard(uint32_t shard) const;
  // The chunks of tensors()[tensor_index], by offset ascending. Empty when
  // tensor_index is out of range.
  absl::Span<const ChunkSpec> ChunksOfTensor(uint32_t tensor_index) const;
  // Elements each shard owns, indexed by shard id.
  absl::Span<const uint64_t> shard_numels() const { return shard_numels_; }

  // FNV-1a 64 of a canonical serialization of the tensor list (count, then
  // each name and numel, little-endian, length-prefixed). Depends on tensor
  // order, names and numels only; identical across processes, builds and
  // platforms.
  uint64_t fingerprint() const { return fingerprint_; }
  // fingerprint() extended with partition_bytes and num_shards: equal on two
  // processes exactly when their plans are equal (up to hash collisions).
  uint64_t plan_fingerprint() const { return plan_fingerprint_; }

 private:
  Partition() = default;

  void CutIntoChunks();
  void PlaceChunks();
  void IndexByShard();

  // All constant after Build.
  std::vector<TensorSpec> tensors_;
  PartitionOptions options_;
  std::vector<ChunkSpec> chunks_;               // By key.
  std::vector<uint64_t> tensor_first_key_;      // Size tensors + 1.
  std::vector<ChunkSpec> chunks_by_shard_;      // By (shard, key).
  std::vector<uint64_t> shard_first_position_;  // Size num_shards + 1.
  std::vector<uint64_t> shard_numels_;
  uint64_t total_numel_ = 0;
  uint64_t fingerprint_ = 0;
  uint64_t plan_fingerprint_ = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_PARTITION_PARTITION_H_
