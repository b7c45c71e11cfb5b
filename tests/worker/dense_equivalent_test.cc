// DenseEquivalent: the serialized size of a step's dense fp32 pushes,
// computed from sizes kept per chunk instead of the messages themselves.
#include "worker/dense_equivalent.h"

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/codec/codec.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

ChunkPlanOptions Options(int local_rank, int local_size) {
  ChunkPlanOptions options;
  options.partition_bytes = 4096;  // 1,024-float chunks.
  options.num_shards = 3;
  options.local_rank = local_rank;
  options.local_size = local_size;
  return options;
}

ChunkPlan::NamedTensors Parameters() {
  // One to 1,024 floats a chunk, over three shards: the chunks' length
  // prefixes take one to three bytes.
  return {{"a", torch::zeros({3000})},
          {"b", torch::zeros({1})},
          {"c", torch::zeros({10, 20})},
          {"d", torch::zeros({1000})}};
}

// The requests themselves, built whole: what DenseEquivalent must match.
uint64_t DenseRequestBytes(const ChunkPlan& plan, uint32_t worker_id,
                           uint64_t step) {
  std::vector<v1::PushRequest> requests(plan.num_shards());
  for (const ChunkSlot& slot : plan.slots()) {
    if (!plan.OwnsLocally(slot.spec.key)) continue;
    CompressedChunk dense;
    dense.numel = slot.spec.numel;
    dense.values.assign(slot.spec.numel, 1.5f);
    v1::ChunkGradient* chunk = requests[slot.spec.shard].add_chunks();
    chunk->set_key(slot.spec.key);
    EXPECT_TRUE(EncodeChunk(dense, chunk->mutable_gradient()).ok());
  }
  uint64_t bytes = 0;
  for (v1::PushRequest& request : requests) {
    if (request.chunks().empty()) continue;
    request.set_worker_id(worker_id);
    request.set_step(step);
    bytes += request.ByteSizeLong();
  }
  return bytes;
}

TEST(DenseEquivalentTest, EqualsTheSerializedDenseRequestsAtEveryStep) {
  for (int local_size : {1, 2}) {
    for (int local_rank = 0; local_rank < local_size; ++local_rank) {
      auto plan =
          ChunkPlan::Build(Parameters(), Options(local_rank, local_size));
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (uint32_t worker_id : {0u, 7u, 300u}) {
        DenseEquivalent equivalent(**plan, worker_id);
        for (uint64_t step : {uint64_t{0}, uint64_t{1}, uint64_t{127},
                              uint64_t{128}, uint64_t{1} << 40}) {
          EXPECT_EQ(equivalent.StepBytes(step),
                    DenseRequestBytes(**plan, worker_id, step))
              << "local rank " << local_rank << " of " << local_size
              << ", worker " << worker_id << ", step " << step;
        }
      }
    }
  }
}

TEST(DenseEquivalentTest, CountsNothingForARankThatHandlesNoChunk) {
  ChunkPlan::NamedTensors one = {{"a", torch::zeros({10})}};
  auto plan = ChunkPlan::Build(one, Options(1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE((*plan)->AllOwnedKeys().empty());
  DenseEquivalent equivalent(**plan, 1);
  EXPECT_EQ(equivalent.StepBytes(5), 0u);
}

}  // namespace
}  // namespace gradwire
