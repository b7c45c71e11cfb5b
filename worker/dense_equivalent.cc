#include "worker/dense_equivalent.h"

#include "common/codec/codec.h"

namespace gradwire {

DenseEquivalent::DenseEquivalent(const ChunkPlan& plan, uint32_t worker_id)
    : requests_(plan.num_shards()) {
  for (v1::PushRequest& request : requests_) request.set_worker_id(worker_id);
  for (const ChunkSlot& slot : plan.slots()) {
    const ChunkSpec& spec = slot.spec;
    if (!plan.OwnsLocally(spec.key)) continue;
    CompressedChunk dense;
    dense.numel = spec.numel;
    dense.values.assign(spec.numel, 0.0f);
    v1::ChunkGradient* chunk = requests_[spec.shard].add_chunks();
    chunk->set_key(spec.key);
    // Dense fp32 of a chunk the plan accepted always encodes.
    EncodeChunk(dense, chunk->mutable_gradient()).IgnoreError();
  }
}

uint64_t DenseEquivalent::StepBytes(uint64_t step) {
  uint64_t bytes = 0;
  for (v1::PushRequest& request : requests_) {
    if (request.chunks().empty()) continue;
    request.set_step(step);
    bytes += request.ByteSizeLong();
  }
  return bytes;
}

}  // namespace gradwire
