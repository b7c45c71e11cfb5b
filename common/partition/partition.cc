#include "common/partition/partition.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace {

constexpr uint64_t kMaxChunkNumel = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kMaxTensors = std::numeric_limits<uint32_t>::max();

// FNV-1a 64. Written out rather than absl::Hash or std::hash because those
// are seeded per process or differ between builds, and every worker and shard
// must compute the same fingerprint.
class Fnv1a64 {
 public:
  explicit Fnv1a64(uint64_t state = 14695981039346656037ull) : state_(state) {}

  void AddBytes(absl::string_view bytes) {
    for (unsigned char c : bytes) {
      state_ ^= c;
      state_ *= 1099511628211ull;
    }
  }
  // Little-endian regardless of the host, so the hash is platform-free.
  void AddU64(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      const char byte = static_cast<char>((v >> (8 * i)) & 0xff);
      AddBytes(absl::string_view(&byte, 1));
    }
  }
  uint64_t value() const { return state_; }

 private:
  uint64_t state_;
};

uint64_t ModelFingerprint(const std::vector<TensorSpec>& tensors) {
  Fnv1a64 hash;
  hash.AddU64(tensors.size());
  for (const TensorSpec& t : tensors) {
    // The length prefix keeps ("ab","c") and ("a","bc") apart.
    hash.AddU64(t.name.size());
    hash.AddBytes(t.name);
    hash.AddU64(t.numel);
  }
  return hash.value();
}

absl::Status ValidateOptions(const PartitionOptions& options) {
  if (options.num_shards == 0 || options.num_shards > Partition::kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards must be in [1, ", Partition::kMaxShards,
                     "], got ", options.num_shards));
  }
  if (options.partition_bytes == 0 || options.partition_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition_bytes must be a positive multiple of 4 (float32), got ",
        options.partition_bytes));
  }
  if (options.partition_bytes / 4 > kMaxChunkNumel) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition_bytes must be at most ", 4 * kMaxChunkNumel,
                     " so that a chunk's element count fits in 32 bits, got ",
                     options.partition_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensors(const std::vector<TensorSpec>& tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("tensor list is empty");
  }
  if (tensors.size() > kMaxTensors) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor list has ", tensors.size(), " tensors, more than ",
                     kMaxTensors));
  }
  absl::flat_hash_map<absl::string_view, size_t> index_of_name;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    if (t.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", i, " has an empty name"));
    }
    if (t.numel == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", i, " '", t.name, "' has numel 0; it needs at least 1"));
    }
    auto [it, inserted] = index_of_name.emplace(t.name, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '",
                                                     t.name, "' at indices ",
                                                     it->second, " and ", i));
    }
  }
  return absl::OkStatus();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

absl::Status ValidateChunkCount(const std::vector<TensorSpec>& tensors,
                                uint64_t max_chunk_numel) {
  uint64_t chunks = 0;
  for (const TensorSpec& t : tensors) {
    // Checked per tensor, so the running sum cannot overflow.
    chunks += CeilDiv(t.numel, max_chunk_numel);
    if (chunks > Partition::kMaxChunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model needs more than ", Partition::kMaxChunks,
                       " chunks at partition_bytes ", 4 * max_chunk_numel,
                       "; raise partition_bytes or check the tensor sizes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Partition> Partition::Build(std::vector<TensorSpec> tensors,
                                           const PartitionOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (absl::Status s = ValidateTensors(tensors); !s.ok()) return s;
  if (absl::Status s = ValidateChunkCount(tensors, options.partition_bytes / 4);
      !s.ok()) {
    return s;
  }
  Partition p;
  p.tensors_ = std::move(tensors);
  p.options_ = options;
  p.fingerprint_ = ModelFingerprint(p.tensors_);
  Fnv1a64 plan_hash(p.fingerprint_);
  plan_hash.AddU64(options.partition_bytes);
  plan_hash.AddU64(options.num_shards);
  p.plan_fingerprint_ = plan_hash.value();
  p.CutIntoChunks();
  p.PlaceChunks();
  p.IndexByShard();
  return p;
}

void Partition::CutIntoChunks() {
  const uint64_t max_numel = max_chunk_numel();
  tensor_first_key_.reserve(tensors_.size() + 1);
  for (uint32_t t = 0; t < tensors_.size(); ++t) {
    tensor_first_key_.push_back(chunks_.size());
    const uint64_t numel = tensors_[t].numel;
    total_numel_ += numel;
    const uint64_t count = CeilDiv(numel, max_numel);
    const uint64_t base = numel / count;
    const uint64_t longer = numel % count;  // Chunks that get base + 1.
    uint64_t offset = 0;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t size = base + (i < longer ? 1 : 0);
      chunks_.push_back(ChunkSpec{chunks_.size(), t, offset, size, 0});
      offset += size;
    }
  }
  tensor_first_key_.push_back(chunks_.size());
}

void Partition::PlaceChunks() {
  std::vector<uint64_t> order(chunks_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [this](uint64_t a, uint64_t b) {
    if (chunks_[a].numel != chunks_[b].numel) {
      return chunks_[a].numel > chunks_[b].numel;
    }
    return a < b;
  });
  // Min-heap on (load, shard): the top is the least-loaded shard, the lowest
  // id among equals.
  using Load = std::pair<uint64_t, uint32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> shards;
  for (uint32_t s = 0; s < num_shards(); ++s) shards.push({0, s});
  shard_numels_.assign(num_shards(), 0);
  for (uint64_t key : order) {
    const uint32_t shard = shards.top().second;
    shards.pop();
    chunks_[key].shard = shard;
    shard_numels_[shard] += chunks_[key].numel;
    shards.push({shard_numels_[shard], shard});
  }
}

void Partition::IndexByShard() {
  // Counting sort by shard; keys stay ascending within a shard.
  shard_first_position_.assign(num_shards() + 1, 0);
  for (const ChunkSpec& c : chunks_) ++shard_first_position_[c.shard + 1];
  for (uint32_t s = 0; s < num_shards(); ++s) {
    shard_first_position_[s + 1] += shard_first_position_[s];
  }
  std::vector<uint64_t> next(shard_first_position_.begin(),
                             shard_first_position_.end() - 1);
  chunks_by_shard_.resize(chunks_.size());
  for (const ChunkSpec& c : chunks_) chunks_by_shard_[next[c.shard]++] = c;
}

const ChunkSpec* Partition::FindChunk(uint64_t key) const {
  return key < chunks_.size() ? &chunks_[key] : nullptr;
}

uint32_t Partition::ShardOf(uint64_t key) const {
  const ChunkSpec* chunk = FindChunk(key);
  return chunk == nullptr ? kNoShard : chunk->shard;
}

absl::Span<const ChunkSpec> Partition::ChunksOfShard(uint32_t shard) const {
  if (shard >= num_shards()) return {};
  const uint64_t begin = shard_first_position_[shard];
  return absl::MakeConstSpan(chunks_by_shard_)
      .subspan(begin, shard_first_position_[shard + 1] - begin);
}

absl::Span<const ChunkSpec> Partition::ChunksOfTensor(
    uint32_t tensor_index) const {
  if (tensor_index >= tensors_.size()) return {};
  const uint64_t begin = tensor_first_key_[tensor_index];
  return absl::MakeConstSpan(chunks_).subspan(
      begin, tensor_first_key_[tensor_index + 1] - begin);
}

}  // namespace gradwire
