#include "worker/chunk_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace gradwire {

absl::StatusOr<std::unique_ptr<ChunkPlan>> ChunkPlan::Build(
    const NamedTensors& parameters, const ChunkPlanOptions& options) {
  std::vector<TensorSpec> specs;
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, tensor] : parameters) {
    if (tensor.scalar_type() != torch::kFloat32 || !tensor.is_contiguous() ||
        !(tensor.device().is_cpu() || tensor.device().is_cuda())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter %s must be a contiguous float32 CPU or CUDA tensor",
          name));
    }
    specs.push_back({name, static_cast<uint64_t>(tensor.numel())});
    tensors.push_back(tensor);
  }
  if (!options.uncompressed.empty() &&
      options.uncompressed.size() != parameters.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("uncompressed: %d flags for %d parameters",
                        options.uncompressed.size(), parameters.size()));
  }
  PartitionOptions partition_options;
  partition_options.partition_bytes = options.partition_bytes;
  partition_options.num_shards = options.num_shards;
  auto partition = Partition::Build(std::move(specs), partition_options);
  if (!partition.ok()) return partition.status();
  return std::unique_ptr<ChunkPlan>(
      new ChunkPlan(*std::move(partition), std::move(tensors), options));
}

ChunkPlan::ChunkPlan(Partition partition, std::vector<torch::Tensor> parameters,
                     const ChunkPlanOptions& options)
    : partition_(std::move(partition)),
      parameters_(std::move(parameters)),
      local_rank_(options.local_rank),
      local_size_(options.local_size),
      owned_keys_(parameters_.size()) {
  weights_.reserve(parameters_.size());
  for (const torch::Tensor& p : parameters_) weights_.push_back(p.detach());
  for (const ChunkSpec& spec : partition_.chunks()) {
    ChunkSlot slot;
    slot.spec = spec;
    slot.uncompressed = !options.uncompressed.empty() &&
                        options.uncompressed[spec.tensor_index];
    if (!options.residual_spare) {
      slot.feedback.spare_from = std::numeric_limits<size_t>::max();
    }
    slots_.push_back(std::move(slot));
    if (OwnsLocally(spec.key)) {
      owned_keys_[spec.tensor_index].push_back(spec.key);
    }
  }
}

bool ChunkPlan::any_cuda() const {
  return std::any_of(
      parameters_.begin(), parameters_.end(),
      [](const torch::Tensor& t) { return t.device().is_cuda(); });
}

std::vector<uint64_t> ChunkPlan::AllOwnedKeys() const {
  std::vector<uint64_t> keys;
  for (const std::vector<uint64_t>& owned : owned_keys_) {
    keys.insert(keys.end(), owned.begin(), owned.end());
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

void ChunkPlan::ForgetVersions() {
  for (ChunkSlot& slot : slots_) {
    slot.version = kHoldsNothing;
    slot.epoch = 0;
  }
}

double ChunkPlan::ResidualNorm() const {
  double sum_of_squares = 0;
  for (const ChunkSlot& slot : slots_) {
    for (const float r : slot.feedback.residual)
      sum_of_squares += double{r} * r;
  }
  return std::sqrt(sum_of_squares);
}

uint64_t ChunkPlan::CompressionStateBytes() const {
  uint64_t floats = 0;
  for (const ChunkSlot& slot : slots_) {
    floats += slot.feedback.residual.capacity() +
              slot.feedback.spare.capacity() +
              slot.feedback.velocity.capacity() + slot.velocity.capacity() +
              slot.momentum_input.capacity() + slot.kept_residual.capacity();
  }
  return floats * sizeof(float);
}

}  // namespace gradwire
