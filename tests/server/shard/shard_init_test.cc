// Shard::Init: first wins, identical later Inits are acknowledged,
// conflicting or invalid ones are refused and change nothing.
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/init_budget.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardInitTest, FirstInitInitialises) {
  Shard shard(Options());
  EXPECT_FALSE(shard.initialized());
  EXPECT_FALSE(shard.Info().initialized());
  v1::InitResponse response;
  ASSERT_TRUE(shard
                  .Init(InitRequest(1, Config(3, v1::CONSISTENCY_MODE_BSP),
                                    DefaultChunks()),
                        &response)
                  .ok());
  EXPECT_TRUE(response.initialized_now());
  EXPECT_THAT(response.versions(), ElementsAre(0, 0));
  EXPECT_THAT(response.next_steps(), ElementsAre(0, 0));
  EXPECT_TRUE(shard.initialized());

  const v1::ShardInfo info = shard.Info();
  EXPECT_TRUE(info.initialized());
  EXPECT_EQ(info.shard_id(), kShardId);
  EXPECT_EQ(info.num_shards(), kNumShards);
  EXPECT_EQ(info.num_chunks(), 2u);
  EXPECT_EQ(info.num_elements(), kNumelA + kNumelB);
  EXPECT_EQ(info.live_workers(), 3u);
  EXPECT_EQ(info.config().num_workers(), 3u);
  EXPECT_EQ(info.min_version(), 0u);
  EXPECT_EQ(info.max_version(), 0u);

  // The initial values are what a dense pull returns, bit for bit.
  EXPECT_EQ(Weights(shard, kKeyA, kNumelA), InitialWeights(kKeyA, kNumelA));
  EXPECT_EQ(Weights(shard, kKeyB, kNumelB), InitialWeights(kKeyB, kNumelB));
}

TEST(ShardInitTest, IdenticalLaterInitIsAcknowledgedWithProgress) {
  const v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_ASP);
  auto shard = StartShard(config);
  // Worker 1 pushes steps 0 and 1 of chunk A; worker 0 step 0 of chunk B.
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(1, 1, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyB, kNumelB)).ok());
  const uint64_t digest = shard->StateDigest();

  v1::InitResponse response;
  ASSERT_TRUE(
      shard->Init(InitRequest(1, config, DefaultChunks()), &response).ok());
  EXPECT_FALSE(response.initialized_now());
  EXPECT_THAT(response.versions(), ElementsAre(2, 1));
  EXPECT_THAT(response.next_steps(), ElementsAre(2, 0));

  // Declared in the other order: answers follow the request's order.
  v1::InitResponse reversed;
  ASSERT_TRUE(shard
                  ->Init(InitRequest(0, config,
                                     {DefaultChunks()[1], DefaultChunks()[0]}),
                         &reversed)
                  .ok());
  EXPECT_FALSE(reversed.initialized_now());
  EXPECT_THAT(reversed.versions(), ElementsAre(1, 2));
  EXPECT_THAT(reversed.next_steps(), ElementsAre(1, 0));
  EXPECT_EQ(shard->StateDigest(), digest);
}

// A later Init that differs from the accepted one: refused, state unchanged.
class ShardConflictingInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
    ASSERT_TRUE(Push(*shard_, DensePush(0, 0, kKeyA, kNumelA)).ok());
    digest_ = shard_->StateDigest();
  }

  void ExpectRefused(const v1::InitRequest& request, absl::StatusCode code,
                     const std::vector<std::string>& message_parts) {
    v1::InitResponse response;
    const absl::Status s = shard_->Init(request, &response);
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& part : message_parts) {
      EXPECT_THAT(s.message(), HasSubstr(part));
    }
    EXPECT_EQ(response.versions_size(), 0);
    EXPECT_EQ(shard_->StateDigest(), digest_);
    EXPECT_EQ(shard_->Info().config().num_workers(), 2u);
  }

  std::unique_ptr<Shard> shard_;
  uint64_t digest_ = 0;
};

TEST_F(ShardConflictingInitTest, DifferentNumWorkers) {
  ExpectRefused(
      InitRequest(1, Config(3, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kFailedPrecondition, {"num_workers", "2", "3"});
}

TEST_F(ShardConflictingInitTest, DifferentLearningRate) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_optimizer()->set_learning_rate(0.25f);
  ExpectRefused(InitRequest(1, config, DefaultChunks()),
                absl::StatusCode::kFailedPrecondition,
                {"learning_rate", "0.5", "0.25"});
}

TEST_F(ShardConflictingInitTest, DifferentMode) {
  ExpectRefused(
      InitRequest(1, Config(2, v1::CONSISTENCY_MODE_ASP), DefaultChunks()),
      absl::StatusCode::kFailedPrecondition, {"mode"});
}

TEST_F(ShardConflictingInitTest, DifferentPullEncoding) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.1);
  ExpectRefused(InitRequest(1, config, DefaultChunks()),
                absl::StatusCode::kFailedPrecondition, {"pull_encoding"});
}

TEST_F(ShardConflictingInitTest, DifferentChunkNumel) {
  std::vector<ChunkSpec> chunks = DefaultChunks();
  chunks[1].initial.push_back(1.0f);
  ExpectRefused(InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kFailedPrecondition,
                {"chunk 19", "numel 6", std::to_string(kNumelB)});
}

TEST_F(ShardConflictingInitTest, ExtraChunk) {
  std::vector<ChunkSpec> chunks = DefaultChunks();
  chunks.push_back({23, InitialWeights(23, 3)});
  ExpectRefused(InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kFailedPrecondition, {"3 chunks", "2"});
}

TEST_F(ShardConflictingInitTest, MissingChunk) {
  ExpectRefused(
      InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP), {DefaultChunks()[0]}),
      absl::StatusCode::kFailedPrecondition, {"1 chunks", "2"});
}

TEST_F(ShardConflictingInitTest, OtherChunkKeyOfTheSameCount) {
  std::vector<ChunkSpec> chunks = DefaultChunks();
  chunks[1].key = 23;
  ExpectRefused(InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kFailedPrecondition, {"chunk 23"});
}

TEST_F(ShardConflictingInitTest, DuplicateChunkHidingAMissingOne) {
  // {A, A} has as many chunks as the accepted {A, B} and each is known.
  std::vector<ChunkSpec> chunks = {DefaultChunks()[0], DefaultChunks()[0]};
  ExpectRefused(InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kInvalidArgument, {"chunk 7", "twice"});
}

TEST_F(ShardConflictingInitTest, WrongShardId) {
  ExpectRefused(InitRequest(1, Config(2, v1::CONSISTENCY_MODE_BSP),
                            DefaultChunks(), kShardId + 1),
                absl::StatusCode::kFailedPrecondition, {"shard 3", "shard 2"});
}

TEST_F(ShardConflictingInitTest, WorkerIdOutOfRange) {
  ExpectRefused(
      InitRequest(2, Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kOutOfRange, {"worker id 2"});
}

// An Init that fails leaves the shard uninitialised; a valid one later wins.
class ShardRefusedFirstInitTest : public ::testing::Test {
 protected:
  void ExpectRefused(const v1::InitRequest& request, absl::StatusCode code,
                     const std::vector<std::string>& message_parts,
                     ShardOptions options = Options()) {
    Shard shard(options);
    const uint64_t fresh = shard.StateDigest();
    v1::InitResponse response;
    const absl::Status s = shard.Init(request, &response);
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& part : message_parts) {
      EXPECT_THAT(s.message(), HasSubstr(part));
    }
    EXPECT_FALSE(shard.initialized());
    EXPECT_EQ(shard.StateDigest(), fresh);
    v1::PushResponse push;
    EXPECT_EQ(shard.Push(DensePush(0, 0, kKeyA, kNumelA), &push).code(),
              absl::StatusCode::kFailedPrecondition);
    // The shard still accepts a valid Init afterwards.
    v1::InitResponse good;
    ASSERT_TRUE(shard
                    .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                                      DefaultChunks()),
                          &good)
                    .ok());
    EXPECT_TRUE(good.initialized_now());
  }
};

TEST_F(ShardRefusedFirstInitTest, WrongShardId) {
  ExpectRefused(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks(), 0),
      absl::StatusCode::kFailedPrecondition, {"shard 0", "shard 2"});
}

TEST_F(ShardRefusedFirstInitTest, NumShardsContradictsFlag) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.set_num_shards(5);
  ExpectRefused(InitRequest(0, config, DefaultChunks()),
                absl::StatusCode::kFailedPrecondition, {"5 shards", "4"});
}

TEST_F(ShardRefusedFirstInitTest, NumWorkersContradictsFlag) {
  ShardOptions options = Options();
  options.num_workers = 2;
  ExpectRefused(
      InitRequest(0, Config(3, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kFailedPrecondition, {"3 workers", "2"}, options);
}

TEST_F(ShardRefusedFirstInitTest, ModeContradictsFlag) {
  ShardOptions options = Options();
  options.mode = v1::CONSISTENCY_MODE_BSP;
  ExpectRefused(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_ASP), DefaultChunks()),
      absl::StatusCode::kFailedPrecondition,
      {"CONSISTENCY_MODE_ASP", "CONSISTENCY_MODE_BSP"}, options);
}

TEST_F(ShardRefusedFirstInitTest, StalenessContradictsFlag) {
  ShardOptions options = Options();
  options.mode = v1::CONSISTENCY_MODE_SSP;
  options.staleness = 3;
  // The follow-up valid Init in ExpectRefused is BSP, so use a shard whose
  // mode flag is SSP only here.
  Shard shard(options);
  v1::InitResponse response;
  const absl::Status s = shard.Init(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_SSP, 2), DefaultChunks()),
      &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("staleness 2"), HasSubstr("3")));
  EXPECT_FALSE(shard.initialized());
  EXPECT_TRUE(shard
                  .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_SSP, 3),
                                    DefaultChunks()),
                        &response)
                  .ok());
}

TEST_F(ShardRefusedFirstInitTest, ZeroWorkers) {
  ExpectRefused(
      InitRequest(0, Config(0, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kInvalidArgument, {"num_workers 0"});
}

TEST_F(ShardRefusedFirstInitTest, UnspecifiedMode) {
  ExpectRefused(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_UNSPECIFIED),
                            DefaultChunks()),
                absl::StatusCode::kInvalidArgument, {"mode"});
}

TEST_F(ShardRefusedFirstInitTest, BadLearningRate) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_optimizer()->set_learning_rate(-1.0f);
  ExpectRefused(InitRequest(0, config, DefaultChunks()),
                absl::StatusCode::kInvalidArgument, {"learning_rate"});
}

TEST_F(ShardRefusedFirstInitTest, UnknownPullCompressor) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("nosuch");
  ExpectRefused(InitRequest(0, config, DefaultChunks()),
                absl::StatusCode::kInvalidArgument, {"nosuch"});
}

TEST_F(ShardRefusedFirstInitTest, NoChunks) {
  ExpectRefused(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), {}),
                absl::StatusCode::kInvalidArgument, {"no chunks"});
}

TEST_F(ShardRefusedFirstInitTest, ChunkDeclaredTwice) {
  ExpectRefused(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP),
                  {DefaultChunks()[0], DefaultChunks()[1], DefaultChunks()[0]}),
      absl::StatusCode::kInvalidArgument, {"chunk 7", "twice"});
}

TEST_F(ShardRefusedFirstInitTest, EmptyChunk) {
  ExpectRefused(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), {{kKeyA, {}}}),
      absl::StatusCode::kInvalidArgument, {"chunk 7", "numel 0"});
}

TEST_F(ShardRefusedFirstInitTest, ChunkOverMaxNumel) {
  ShardOptions options = Options();
  options.max_chunk_numel = kNumelA;  // The default chunks just fit.
  std::vector<ChunkSpec> chunks = DefaultChunks();
  chunks[0].initial.push_back(0.5f);
  ExpectRefused(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kInvalidArgument, {"chunk 7", "numel 9"},
                options);
}

// Each chunk keeps every worker's progress: 2 chunks x 65536 workers would
// cost the shard MiBs for an Init of a few hundred bytes. The limit is on
// the estimated cost (init_budget.h); init_budget_test.cc has the rest.
TEST_F(ShardRefusedFirstInitTest, ChunksTimesWorkersOverBudget) {
  ShardOptions options = Options();
  options.max_init_overhead_bytes = EstimateInitOverheadBytes(
      InitRequest(0, Config(3, v1::CONSISTENCY_MODE_BSP), DefaultChunks()), 3);
  ExpectRefused(
      InitRequest(0, Config(4, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kResourceExhausted,
      {"2 chunks", "4 workers", "--max-init-overhead-bytes"}, options);
  auto shard =
      StartShard(Config(3, v1::CONSISTENCY_MODE_BSP), DefaultChunks(), options);
  EXPECT_TRUE(shard->initialized());
}

TEST_F(ShardRefusedFirstInitTest, SparseInitialValues) {
  v1::InitRequest request =
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks());
  *request.mutable_chunks(1)->mutable_initial() =
      CompressedData("topk", InitialWeights(kKeyB, kNumelB), 0.5);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument,
                {"chunk 19", "dense"});
}

TEST_F(ShardRefusedFirstInitTest, NonFiniteInitialValue) {
  std::vector<ChunkSpec> chunks = DefaultChunks();
  chunks[0].initial[3] = std::numeric_limits<float>::quiet_NaN();
  ExpectRefused(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), chunks),
                absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

TEST_F(ShardRefusedFirstInitTest, WorkerIdOutOfRange) {
  ExpectRefused(
      InitRequest(5, Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      absl::StatusCode::kOutOfRange, {"worker id 5"});
}

TEST(ShardInitTest, FlagsThatAgreeAreAccepted) {
  ShardOptions options = Options();
  options.num_workers = 3;
  options.mode = v1::CONSISTENCY_MODE_SSP;
  options.staleness = 2;
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_SSP, 2),
                          DefaultChunks(), options);
  EXPECT_TRUE(shard->initialized());
}

TEST(ShardInitTest, FirstOfTwoDifferentInitsWins) {
  Shard shard(Options());
  v1::InitResponse first, second;
  ASSERT_TRUE(shard
                  .Init(InitRequest(0, Config(2, v1::CONSISTENCY_MODE_ASP),
                                    DefaultChunks()),
                        &first)
                  .ok());
  const absl::Status s = shard.Init(
      InitRequest(0, Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks()),
      &second);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.Info().config().mode(), v1::CONSISTENCY_MODE_ASP);
}

TEST(ShardInitTest, ConcurrentIdenticalInitsInitialiseOnce) {
  constexpr int kWorkers = 8;
  Shard shard(Options());
  const v1::TrainingConfig config = Config(kWorkers, v1::CONSISTENCY_MODE_BSP);
  std::atomic<int> initialized_now{0}, ok{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      v1::InitResponse response;
      if (shard.Init(InitRequest(w, config, DefaultChunks()), &response).ok()) {
        ++ok;
        if (response.initialized_now()) ++initialized_now;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kWorkers);
  EXPECT_EQ(initialized_now.load(), 1);
}

TEST(ShardInitTest, InfoBeforeInit) {
  Shard shard(Options());
  const v1::ShardInfo info = shard.Info();
  EXPECT_FALSE(info.initialized());
  EXPECT_EQ(info.shard_id(), kShardId);
  EXPECT_EQ(info.num_shards(), kNumShards);
  EXPECT_EQ(info.num_chunks(), 0u);
  EXPECT_FALSE(info.build_version().empty());
}

}  // namespace
}  // namespace gradwire
