// ShardOptions::apply_threads: the chunks of one push prepared and applied
// on several threads give the same state and acks as on one, and a push
// that one chunk makes non-finite is still refused whole.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

// Four chunks of 40K elements: 160K together, over kParallelApplyElements
// for dense pushes and for Top-K at half of them.
constexpr uint64_t kChunks = 4;
constexpr uint64_t kNumel = 40000;
static_assert(kChunks * kNumel / 2 >= kParallelApplyElements);

std::vector<ChunkSpec> LargeChunks() {
  std::vector<ChunkSpec> chunks;
  for (uint64_t key = 1; key <= kChunks; ++key) {
    chunks.push_back({key, InitialWeights(key, kNumel)});
  }
  return chunks;
}

ShardOptions WithApplyThreads(int threads) {
  ShardOptions options = Options();
  options.apply_threads = threads;
  return options;
}

// Every chunk's gradient of `worker` at `step`, Top-K at `ratio` (sparse)
// or dense (ratio 0).
v1::PushRequest WholePush(uint32_t worker, uint64_t step, double ratio) {
  std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
  for (uint64_t key = kChunks; key >= 1; --key) {
    const std::vector<float> g = Gradient(worker, step * 5 + key, kNumel);
    chunks.emplace_back(
        key, ratio > 0 ? CompressedData("topk", g, ratio) : DenseData(g));
  }
  return PushRequest(worker, step, std::move(chunks));
}

// The same pushes into a shard on one thread and one with three helpers:
// the same digest after every push, the same acks.
void ExpectSameAsSerial(const v1::TrainingConfig& config, double ratio) {
  auto serial = StartShard(config, LargeChunks(), WithApplyThreads(0));
  auto parallel = StartShard(config, LargeChunks(), WithApplyThreads(3));
  const uint32_t workers = config.num_workers();
  for (uint64_t step = 0; step < 3; ++step) {
    for (uint32_t worker = 0; worker < workers; ++worker) {
      const v1::PushRequest request = WholePush(worker, step, ratio);
      const auto one = Push(*serial, request);
      const auto many = Push(*parallel, request);
      ASSERT_TRUE(one.ok()) << one.status();
      ASSERT_TRUE(many.ok()) << many.status();
      EXPECT_EQ(one->SerializeAsString(), many->SerializeAsString());
      EXPECT_EQ(serial->StateDigest(), parallel->StateDigest())
          << "step " << step << " worker " << worker;
    }
  }
}

TEST(ShardParallelApplyTest, AspSparsePushesMatchOneThread) {
  ExpectSameAsSerial(Config(1, v1::CONSISTENCY_MODE_ASP), 0.5);
}

TEST(ShardParallelApplyTest, AspDensePushesUnderMomentumMatchOneThread) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_ASP);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
  config.mutable_optimizer()->set_momentum(0.9f);
  ExpectSameAsSerial(config, 0);
}

TEST(ShardParallelApplyTest, BspStepsMatchOneThread) {
  ExpectSameAsSerial(Config(2, v1::CONSISTENCY_MODE_BSP), 0);
  ExpectSameAsSerial(Config(2, v1::CONSISTENCY_MODE_BSP), 0.5);
}

// One chunk's update would overflow: the push is refused whole, naming
// that chunk, whichever thread prepared it.
TEST(ShardParallelApplyTest, NonFiniteChunkRefusesTheWholePush) {
  std::vector<ChunkSpec> chunks = LargeChunks();
  chunks[2].initial[0] = 3e38f;
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_ASP);
  config.mutable_optimizer()->set_learning_rate(1.0f);
  auto shard = StartShard(config, chunks, WithApplyThreads(3));
  const uint64_t digest = shard->StateDigest();
  v1::PushRequest request = WholePush(0, 0, 0);
  std::vector<float> spike(kNumel, 0.0f);
  spike[0] = -3e38f;
  for (v1::ChunkGradient& gradient : *request.mutable_chunks()) {
    if (gradient.key() == chunks[2].key) {
      *gradient.mutable_gradient() = DenseData(spike);
    }
  }
  v1::PushResponse response;
  const absl::Status s = shard->Push(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("chunk " + std::to_string(chunks[2].key)));
  EXPECT_EQ(shard->StateDigest(), digest);
  // The shard goes on: the next push of sane gradients is applied.
  const auto next = Push(*shard, WholePush(0, 0, 0));
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_NE(shard->StateDigest(), digest);
}

// A push large enough to be decoded on the pool, with a chunk that does
// not decode and, after it in the request, another that does not decode, a
// repeated chunk or a chunk the shard does not hold: refused, naming the
// first of them in the request's order, with nothing changed, as on one
// thread.
TEST(ShardParallelApplyTest, FirstRefusalInRequestOrderIsReturned) {
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_ASP), LargeChunks(),
                          WithApplyThreads(3));
  const uint64_t digest = shard->StateDigest();
  // WholePush lists keys 4, 3, 2, 1: entry 1 is key 3.
  const auto truncate = [](v1::ChunkGradient* gradient) {
    gradient->mutable_gradient()->mutable_dense()->mutable_values()->resize(3);
  };
  const std::vector<std::function<void(v1::PushRequest*)>> laters = {
      [&](v1::PushRequest* r) { truncate(r->mutable_chunks(3)); },
      [](v1::PushRequest* r) { r->mutable_chunks(3)->set_key(4); },
      [](v1::PushRequest* r) { r->mutable_chunks(3)->set_key(99); },
  };
  for (size_t later = 0; later < laters.size(); ++later) {
    v1::PushRequest request = WholePush(0, 0, 0);
    truncate(request.mutable_chunks(1));
    laters[later](&request);
    v1::PushResponse response;
    const absl::Status s = shard->Push(request, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << s << " (later refusal " << later << ")";
    EXPECT_THAT(s.message(), HasSubstr("chunk 3:")) << s;
    EXPECT_EQ(shard->StateDigest(), digest);
  }
  const auto next = Push(*shard, WholePush(0, 0, 0));
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
}  // namespace gradwire
