#include "worker/node_broadcast.h"

#include <algorithm>
#include <vector>

#include "worker/device_chunks.h"
#include "worker/host_chunk.h"

namespace gradwire {
namespace {

// Copies chunk `spec` of `parameter` to elements [position, position +
// numel) of `flat`, or back when !to_flat. CPU to CPU without libtorch;
// anything on a CUDA device through a tensor copy.
void CopyChunk(const torch::Tensor& parameter, const ChunkSpec& spec,
               const torch::Tensor& flat, int64_t position, bool to_flat) {
  if (parameter.device().is_cpu() && flat.device().is_cpu()) {
    const auto chunk = HostChunk(parameter, spec.offset, spec.numel);
    float* buffer = flat.data_ptr<float>() + position;
    if (to_flat) {
      std::copy(chunk.begin(), chunk.end(), buffer);
    } else {
      std::copy(buffer, buffer + spec.numel, chunk.begin());
    }
    return;
  }
  torch::Tensor chunk = ChunkView(parameter, spec.offset, spec.numel);
  torch::Tensor part = flat.narrow(0, position, spec.numel);
  if (to_flat) {
    part.copy_(chunk);
  } else {
    chunk.copy_(part);
  }
}

// Copies the chunks `owned` of `plan` into `flat`, one after the other, or
// back when !to_flat.
void CopyChunks(const ChunkPlan& plan,
                const std::vector<const ChunkSlot*>& owned,
                const torch::Tensor& flat, bool to_flat) {
  int64_t position = 0;
  for (const ChunkSlot* slot : owned) {
    CopyChunk(plan.ParameterOf(slot->spec), slot->spec, flat, position,
              to_flat);
    position += slot->spec.numel;
  }
}

}  // namespace

absl::Status ShareInsideNode(LocalGroup& group, const ChunkPlan& plan,
                             const std::vector<bool>& carried) {
  if (group.size() <= 1) return absl::OkStatus();
  for (int root = 0; root < group.size(); ++root) {
    std::vector<const ChunkSlot*> owned;
    int64_t total = 0;
    for (const ChunkSlot& slot : plan.slots()) {
      if (plan.LocalOwnerOf(slot.spec.key) != root) continue;
      if (!carried.empty() && !carried[slot.spec.tensor_index]) continue;
      owned.push_back(&slot);
      total += slot.spec.numel;
    }
    if (owned.empty()) continue;
    const torch::Device device = plan.ParameterOf(owned.front()->spec).device();
    torch::Tensor flat = torch::empty(
        {total}, torch::TensorOptions(torch::kFloat32).device(device));
    if (root == group.rank()) CopyChunks(plan, owned, flat, /*to_flat=*/true);
    std::vector<torch::Tensor> buffers = {flat};
    if (absl::Status s = group.Broadcast(buffers, root); !s.ok()) return s;
    CopyChunks(plan, owned, flat, /*to_flat=*/false);
  }
  return absl::OkStatus();
}

}  // namespace gradwire
