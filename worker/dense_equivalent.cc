#include "worker/dense_equivalent.h"

#include "common/codec/codec.h"

namespace gradwire {

DenseEquivalent::DenseEquivalent(const ChunkPlan& plan, uint32_t worker_id)
    : shards_(plan.num_shards()) {
  for (ShardBytes& shard : shards_) shard.header.set_worker_id(worker_id);
  v1::PushRequest empty;
  const size_t empty_bytes = empty.ByteSizeLong();
  for (const ChunkSlot& slot : plan.slots()) {
    const ChunkSpec& spec = slot.spec;
    if (!plan.OwnsLocally(spec.key)) continue;
    // One chunk's dense payload at a time: a repeated field's size is the
    // sum of its elements', so a request holding only this chunk measures
    // what the chunk adds to any request.
    CompressedChunk dense;
    dense.numel = spec.numel;
    dense.values.assign(spec.numel, 0.0f);
    v1::PushRequest one;
    v1::ChunkGradient* chunk = one.add_chunks();
    chunk->set_key(spec.key);
    // Dense fp32 of a chunk the plan accepted always encodes.
    EncodeChunk(dense, chunk->mutable_gradient()).IgnoreError();
    ShardBytes& shard = shards_[spec.shard];
    shard.chunk_bytes += one.ByteSizeLong() - empty_bytes;
    ++shard.chunks;
  }
}

uint64_t DenseEquivalent::StepBytes(uint64_t step) {
  uint64_t bytes = 0;
  for (ShardBytes& shard : shards_) {
    if (shard.chunks == 0) continue;
    shard.header.set_step(step);
    bytes += shard.header.ByteSizeLong() + shard.chunk_bytes;
  }
  return bytes;
}

}  // namespace gradwire
