#include "worker/init_requests.h"

#include <algorithm>
#include <limits>

#include "common/codec/chunk_fingerprint.h"
#include "common/codec/codec.h"
#include "worker/host_chunk.h"
#include "worker/torch_errors.h"

namespace gradwire {
namespace {

// The tensors' values on the host: CPU tensors as they are (no copy), CUDA
// ones copied. Throws as libtorch does.
std::vector<torch::Tensor> OnHost(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> host;
  for (const torch::Tensor& t : tensors) {
    host.push_back(t.device().is_cuda() ? t.cpu() : t);
  }
  return host;
}

}  // namespace

absl::StatusOr<std::vector<v1::InitRequest>> BuildInitRequests(
    const ChunkPlan& plan, const v1::TrainingConfig& config, uint32_t worker_id,
    InitValues values) {
  std::vector<v1::InitRequest> requests(plan.num_shards());
  for (uint32_t s = 0; s < plan.num_shards(); ++s) {
    requests[s].set_worker_id(worker_id);
    requests[s].set_shard_id(s);
    *requests[s].mutable_config() = config;
    requests[s].set_values_omitted(values == InitValues::kOmitted);
  }
  std::vector<torch::Tensor> host_values;
  if (absl::Status s = CatchTorch("gradwire register",
                                  [&]() -> absl::Status {
                                    host_values = OnHost(plan.parameters());
                                    return absl::OkStatus();
                                  });
      !s.ok()) {
    return s;
  }
  for (const ChunkSlot& slot : plan.slots()) {
    const ChunkSpec& spec = slot.spec;
    v1::ChunkDeclaration* declaration = requests[spec.shard].add_chunks();
    declaration->set_key(spec.key);
    declaration->set_tensor_name(plan.NameOf(spec));
    declaration->set_offset(spec.offset);
    const auto chunk =
        HostChunk(host_values[spec.tensor_index], spec.offset, spec.numel);
    declaration->set_fingerprint(ChunkFingerprint(chunk));
    if (values == InitValues::kOmitted) {
      declaration->mutable_initial()->set_numel(spec.numel);
      continue;
    }
    CompressedChunk dense;
    dense.numel = spec.numel;
    dense.values.assign(chunk.begin(), chunk.end());
    if (absl::Status s = EncodeChunk(dense, declaration->mutable_initial());
        !s.ok()) {
      return s;
    }
  }
  return requests;
}

uint64_t ResumeStep(const std::vector<v1::InitResponse>& responses) {
  uint64_t resume = std::numeric_limits<uint64_t>::max();
  for (const v1::InitResponse& response : responses) {
    for (uint64_t next : response.next_steps()) resume = std::min(resume, next);
  }
  return resume == std::numeric_limits<uint64_t>::max() ? 0 : resume;
}

}  // namespace gradwire
