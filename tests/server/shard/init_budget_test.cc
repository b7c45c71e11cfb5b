// The Init budget (init_budget.h): Inits that would make the shard allocate
// far more than they carry are RESOURCE_EXHAUSTED before anything is
// allocated, and the estimate they are judged by is an honest upper bound of
// what an accepted Init really allocates (measured with glibc's mallinfo2).
#include "server/shard/init_budget.h"

#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

// `count` chunks of `numel` elements, keys 0..count-1.
std::vector<ChunkSpec> Chunks(uint64_t count, uint64_t numel) {
  std::vector<ChunkSpec> chunks;
  chunks.reserve(count);
  for (uint64_t key = 0; key < count; ++key) {
    chunks.push_back({key, InitialWeights(key, numel)});
  }
  return chunks;
}

// Expects `request` refused as RESOURCE_EXHAUSTED with every one of
// `message_parts` in the message, and the shard left uninitialised: a
// following valid Init is the first.
void ExpectRefusedAndUninitialised(
    Shard& shard, const v1::InitRequest& request,
    const std::vector<std::string>& message_parts) {
  v1::InitResponse response;
  const absl::Status s = shard.Init(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  for (const std::string& part : message_parts) {
    EXPECT_THAT(s.message(), HasSubstr(part));
  }
  EXPECT_EQ(response.versions_size(), 0);
  EXPECT_FALSE(shard.initialized());
  EXPECT_FALSE(shard.Info().initialized());

  v1::InitResponse valid;
  ASSERT_TRUE(shard
                  .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                                    DefaultChunks()),
                        &valid)
                  .ok());
  EXPECT_TRUE(valid.initialized_now());
  EXPECT_EQ(shard.Info().num_chunks(), 2u);
}

// A 4.7 KB Init of 256 one-element chunks for 65536 workers used to cost
// the shard 260 MB of worker progress.
TEST(InitBudgetTest, ManyWorkersTimesChunksIsRefused) {
  const v1::InitRequest request =
      InitRequest(0, Config(65536, v1::CONSISTENCY_MODE_BSP), Chunks(256, 1));
  const uint64_t estimate = EstimateInitOverheadBytes(request, 65536);
  std::printf("256 chunks x 65536 workers: request %zu bytes, estimate %llu\n",
              request.ByteSizeLong(),
              static_cast<unsigned long long>(estimate));
  // At least the progress entries alone.
  EXPECT_GE(estimate, uint64_t{256} * 65536 * sizeof(WorkerProgress));
  Shard shard(Options());
  ExpectRefusedAndUninitialised(
      shard, request,
      {"256 chunks", "65536 workers", std::to_string(estimate),
       std::to_string(Options().max_init_overhead_bytes),
       "--max-init-overhead-bytes"});
}

// A million one-element chunks used to take seconds and a GB; a count one
// over the limit is refused before any chunk is built.
TEST(InitBudgetTest, ChunksOverMaxChunksAreRefused) {
  const uint64_t max_chunks = Options().max_chunks;
  Shard shard(Options());
  ExpectRefusedAndUninitialised(
      shard,
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                  Chunks(max_chunks + 1, 1)),
      {std::to_string(max_chunks + 1), std::to_string(max_chunks),
       "--max-chunks"});
}

TEST(InitBudgetTest, MaxChunksIsInclusive) {
  ShardOptions options = Options();
  options.max_chunks = 100;
  Shard shard(options);
  v1::InitResponse response;
  EXPECT_EQ(shard
                .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                                  Chunks(101, 1)),
                      &response)
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(shard.initialized());
  EXPECT_TRUE(shard
                  .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                                    Chunks(100, 1)),
                        &response)
                  .ok());
  EXPECT_EQ(shard.Info().num_chunks(), 100u);
}

TEST(InitBudgetTest, OverheadLimitIsInclusive) {
  const v1::InitRequest request =
      InitRequest(0, Config(8, v1::CONSISTENCY_MODE_ASP), Chunks(10, 3));
  ShardOptions options = Options();
  options.max_init_overhead_bytes = EstimateInitOverheadBytes(request, 8) - 1;
  {
    Shard shard(options);
    ExpectRefusedAndUninitialised(shard, request,
                                  {"--max-init-overhead-bytes"});
  }
  options.max_init_overhead_bytes += 1;
  Shard shard(options);
  v1::InitResponse response;
  EXPECT_TRUE(shard.Init(request, &response).ok());
}

// The budget is about bookkeeping, not the model: it does not depend on
// chunk sizes, and a 200-tensor model of 4 MiB chunks for 64 workers is far
// inside the default. (Checked on the request: building 800 MB of initial
// values is not needed to judge it.)
TEST(InitBudgetTest, RealisticModelFitsTheDefault) {
  v1::InitRequest large;
  v1::InitRequest small;
  for (uint64_t key = 0; key < 200; ++key) {
    const std::string name =
        "encoder.layers." + std::to_string(key / 8) + ".mlp.fc1.weight";
    for (auto [request, numel] : {std::pair{&large, uint64_t{1} << 20},
                                  std::pair{&small, uint64_t{1}}}) {
      v1::ChunkDeclaration* declaration = request->add_chunks();
      declaration->set_key(key);
      declaration->set_tensor_name(name);
      declaration->mutable_initial()->set_numel(numel);
    }
  }
  const uint64_t estimate = EstimateInitOverheadBytes(large, 64);
  std::printf("200 chunks of 1M floats x 64 workers: estimate %llu bytes\n",
              static_cast<unsigned long long>(estimate));
  EXPECT_EQ(estimate, EstimateInitOverheadBytes(small, 64));
  EXPECT_LT(estimate, Options().max_init_overhead_bytes / 16);
  EXPECT_TRUE(CheckInitBudget(large, 64, Options()).ok());

  // The same shape with small chunks through a real Init.
  Shard shard(Options());
  v1::InitResponse response;
  EXPECT_TRUE(shard
                  .Init(InitRequest(0, Config(64, v1::CONSISTENCY_MODE_BSP),
                                    Chunks(200, 1024)),
                        &response)
                  .ok());
}

// Bytes the process has in use from malloc: small blocks in the arenas and
// large ones mapped on their own.
uint64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// Whether mallinfo2 sees this process' allocations (a sanitizer's allocator
// bypasses glibc's).
bool MallinfoSeesAllocations() {
  const uint64_t before = HeapInUse();
  auto probe = std::make_unique<char[]>(1 << 20);
  static char* volatile sink;
  sink = probe.get();
  sink[0] = 1;
  return HeapInUse() >= before + (1 << 20);
}

struct MeasuredShape {
  uint64_t chunks;
  uint32_t workers;
  uint64_t numel;
  bool delta_pulls;
};

class InitBudgetMeasuredTest : public ::testing::TestWithParam<MeasuredShape> {
};

// What an accepted Init keeps allocated, less its element data, is at most
// the estimate, and the estimate at most three times that.
TEST_P(InitBudgetMeasuredTest, EstimateBoundsWhatInitAllocates) {
  if (!MallinfoSeesAllocations()) {
    GTEST_SKIP() << "mallinfo2 does not see this build's allocator";
  }
  const MeasuredShape shape = GetParam();
  v1::TrainingConfig config = Config(shape.workers, v1::CONSISTENCY_MODE_BSP);
  if (shape.delta_pulls) {
    config.mutable_pull_encoding()->set_compressor("topk");
    config.mutable_pull_encoding()->set_ratio(0.5);
  }
  const v1::InitRequest request =
      InitRequest(0, config, Chunks(shape.chunks, shape.numel));
  const uint64_t estimate = EstimateInitOverheadBytes(request, shape.workers);
  Shard shard(Options());
  auto response = std::make_unique<v1::InitResponse>();

  const uint64_t before = HeapInUse();
  ASSERT_TRUE(shard.Init(request, response.get()).ok());
  const uint64_t after = HeapInUse();

  const uint64_t element_bytes =
      shape.chunks * shape.numel * sizeof(float) * (shape.delta_pulls ? 2 : 1);
  ASSERT_GE(after, before + element_bytes);
  const uint64_t overhead = after - before - element_bytes;
  std::printf(
      "%llu chunks x %u workers (numel %llu, %s pulls): measured %llu bytes "
      "beyond %llu of element data, estimate %llu (%.2fx)\n",
      static_cast<unsigned long long>(shape.chunks), shape.workers,
      static_cast<unsigned long long>(shape.numel),
      shape.delta_pulls ? "delta" : "dense",
      static_cast<unsigned long long>(overhead),
      static_cast<unsigned long long>(element_bytes),
      static_cast<unsigned long long>(estimate),
      static_cast<double>(estimate) / static_cast<double>(overhead));
  EXPECT_LE(overhead, estimate);
  EXPECT_LE(estimate, 3 * overhead);
}

INSTANTIATE_TEST_SUITE_P(Shapes, InitBudgetMeasuredTest,
                         ::testing::Values(MeasuredShape{5000, 64, 4, false},
                                           MeasuredShape{5000, 64, 4, true},
                                           MeasuredShape{200, 4096, 4, false},
                                           MeasuredShape{16, 65536, 1, true}));

}  // namespace
}  // namespace gradwire
