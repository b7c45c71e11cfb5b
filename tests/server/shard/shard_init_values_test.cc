// Shard::Init without values (InitRequest.values_omitted): the election of
// the worker that sends them, the others' wait, re-election after the
// provider's deadline, shards that need no values, and the fingerprints of
// the answer.
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/codec/chunk_fingerprint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);
const absl::Time kStart = absl::FromUnixSeconds(1000000);

ShardOptions ElectionOptions() {
  ShardOptions options = Options();
  options.init_values_timeout = kTimeout;
  return options;
}

// `worker`'s Init of `chunks` without their values: numel and fingerprint.
v1::InitRequest Valueless(uint32_t worker, const v1::TrainingConfig& config,
                          const std::vector<ChunkSpec>& chunks,
                          uint32_t shard_id = kShardId) {
  v1::InitRequest request = InitRequest(worker, config, chunks, shard_id);
  request.set_values_omitted(true);
  for (int i = 0; i < request.chunks_size(); ++i) {
    v1::ChunkDeclaration* declaration = request.mutable_chunks(i);
    declaration->set_fingerprint(ChunkFingerprint(chunks[i].initial));
    declaration->mutable_initial()->Clear();
    declaration->mutable_initial()->set_numel(chunks[i].initial.size());
  }
  return request;
}

v1::InitResponse InitAt(Shard& shard, const v1::InitRequest& request,
                        absl::Time now) {
  v1::InitResponse response;
  const absl::Status s = shard.Init(request, &response, now);
  EXPECT_TRUE(s.ok()) << s;
  return response;
}

// The values of DefaultChunks() with the first element of each changed.
std::vector<ChunkSpec> OtherChunks() {
  std::vector<ChunkSpec> chunks = DefaultChunks();
  for (ChunkSpec& chunk : chunks) chunk.initial[0] += 0.5f;
  return chunks;
}

const v1::TrainingConfig kConfig = Config(3, v1::CONSISTENCY_MODE_BSP);

// kShardId % 3 workers: the worker the shard prefers to send its values.
constexpr uint32_t kPreferred = kShardId % 3;
static_assert(kPreferred == 2);

TEST(ShardInitValuesTest, PreferredWorkerIsElectedAndOthersWait) {
  Shard shard(ElectionOptions());
  const v1::InitResponse early =
      InitAt(shard, Valueless(1, kConfig, DefaultChunks()), kStart);
  EXPECT_FALSE(early.send_values());
  EXPECT_TRUE(early.values_pending());
  EXPECT_EQ(early.values_provider(), kPreferred);

  const v1::InitResponse first =
      InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()),
             kStart + absl::Milliseconds(500));
  EXPECT_TRUE(first.send_values());
  EXPECT_FALSE(first.values_pending());
  EXPECT_EQ(first.versions_size(), 0);
  EXPECT_FALSE(shard.initialized());

  const v1::InitResponse second = InitAt(
      shard, Valueless(1, kConfig, DefaultChunks()), kStart + absl::Seconds(1));
  EXPECT_FALSE(second.send_values());
  EXPECT_TRUE(second.values_pending());
  EXPECT_EQ(second.values_provider(), kPreferred);
  EXPECT_GT(second.retry_after_ms(), 0u);
  EXPECT_LE(second.retry_after_ms(), 200u);
  EXPECT_EQ(second.fingerprints_size(), 0);

  // The provider asking again (its answer was lost) is told again.
  EXPECT_TRUE(InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()),
                     kStart + absl::Seconds(2))
                  .send_values());
  EXPECT_FALSE(shard.initialized());
}

// The preferred worker is waited for only InitElection::kPreferredGrace:
// then the first caller is elected.
TEST(ShardInitValuesTest, FirstCallerIsElectedAfterTheGrace) {
  Shard shard(ElectionOptions());
  ASSERT_TRUE(InitAt(shard, Valueless(0, kConfig, DefaultChunks()), kStart)
                  .values_pending());
  EXPECT_TRUE(InitAt(shard, Valueless(0, kConfig, DefaultChunks()),
                     kStart + InitElection::kPreferredGrace)
                  .send_values());
  const v1::InitResponse late =
      InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()),
             kStart + InitElection::kPreferredGrace + absl::Milliseconds(1));
  EXPECT_TRUE(late.values_pending());
  EXPECT_EQ(late.values_provider(), 0u);
}

TEST(ShardInitValuesTest, ValuesEndTheWaitWithMatchingFingerprints) {
  Shard shard(ElectionOptions());
  ASSERT_TRUE(
      InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()), kStart)
          .send_values());
  const v1::InitResponse installed =
      InitAt(shard, InitRequest(kPreferred, kConfig, DefaultChunks()), kStart);
  EXPECT_TRUE(installed.initialized_now());
  ASSERT_TRUE(shard.initialized());

  const v1::InitResponse waiter =
      InitAt(shard, Valueless(0, kConfig, DefaultChunks()), kStart);
  EXPECT_FALSE(waiter.send_values());
  EXPECT_FALSE(waiter.values_pending());
  EXPECT_FALSE(waiter.initialized_now());
  EXPECT_THAT(waiter.versions(), ElementsAre(0, 0));
  EXPECT_THAT(waiter.next_steps(), ElementsAre(0, 0));
  EXPECT_THAT(waiter.fingerprints(),
              ElementsAre(ChunkFingerprint(InitialWeights(kKeyA, kNumelA)),
                          ChunkFingerprint(InitialWeights(kKeyB, kNumelB))));
  EXPECT_THAT(waiter.fingerprint_versions(), ElementsAre(0, 0));
  EXPECT_EQ(waiter.history_epoch(), kHistoryEpoch);
  // The Init with values is answered the same way.
  EXPECT_THAT(installed.fingerprints(),
              ::testing::ElementsAreArray(waiter.fingerprints()));
}

TEST(ShardInitValuesTest, ProviderPastItsDeadlineLosesTheElection) {
  Shard shard(ElectionOptions());
  ASSERT_TRUE(
      InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()), kStart)
          .send_values());
  // Just before the deadline worker 1 still waits for worker 2...
  const v1::InitResponse before =
      InitAt(shard, Valueless(1, kConfig, DefaultChunks()),
             kStart + kTimeout - absl::Milliseconds(1));
  EXPECT_TRUE(before.values_pending());
  EXPECT_EQ(before.values_provider(), kPreferred);
  // ...and is asked to retry no later than the deadline.
  EXPECT_LE(before.retry_after_ms(), 5u);
  // At the deadline the next caller is elected, and worker 2 waits.
  EXPECT_TRUE(
      InitAt(shard, Valueless(1, kConfig, DefaultChunks()), kStart + kTimeout)
          .send_values());
  const v1::InitResponse late =
      InitAt(shard, Valueless(kPreferred, kConfig, DefaultChunks()),
             kStart + kTimeout + absl::Seconds(1));
  EXPECT_TRUE(late.values_pending());
  EXPECT_EQ(late.values_provider(), 1u);
  // Values from either initialise the shard; the other's are compared.
  EXPECT_TRUE(InitAt(shard, InitRequest(kPreferred, kConfig, DefaultChunks()),
                     kStart + kTimeout + absl::Seconds(2))
                  .initialized_now());
  const v1::InitResponse second =
      InitAt(shard, InitRequest(1, kConfig, DefaultChunks()),
             kStart + kTimeout + absl::Seconds(3));
  EXPECT_FALSE(second.initialized_now());
  EXPECT_EQ(Weights(shard, kKeyA, kNumelA), InitialWeights(kKeyA, kNumelA));
}

TEST(ShardInitValuesTest, TrainedShardNeedsNoValues) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_ASP), DefaultChunks(),
                          ElectionOptions());
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(1, 1, kKeyA, kNumelA)).ok());
  const v1::InitResponse response =
      InitAt(*shard,
             Valueless(0, Config(2, v1::CONSISTENCY_MODE_ASP), DefaultChunks()),
             kStart);
  EXPECT_FALSE(response.send_values() || response.values_pending());
  EXPECT_THAT(response.versions(), ElementsAre(2, 0));
  EXPECT_THAT(response.fingerprint_versions(), ElementsAre(2, 0));
  // The trained chunk no longer matches the worker's initial values; the
  // untouched one does.
  ASSERT_EQ(response.fingerprints_size(), 2);
  EXPECT_EQ(response.fingerprints(0),
            ChunkFingerprint(Weights(*shard, kKeyA, kNumelA)));
  EXPECT_NE(response.fingerprints(0),
            ChunkFingerprint(InitialWeights(kKeyA, kNumelA)));
  EXPECT_EQ(response.fingerprints(1),
            ChunkFingerprint(InitialWeights(kKeyB, kNumelB)));
}

TEST(ShardInitValuesTest, RestoredShardNeedsNoValues) {
  auto trained = StartShard(kConfig, DefaultChunks(), ElectionOptions());
  for (uint32_t worker = 0; worker < 3; ++worker) {
    ASSERT_TRUE(Push(*trained, DensePush(worker, 0, kKeyB, kNumelB)).ok());
  }
  absl::StatusOr<ShardSnapshot> snapshot = trained->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ShardOptions options = ElectionOptions();
  options.history_epoch = kHistoryEpoch + 1;
  Shard restored(options);
  ASSERT_TRUE(restored.Restore(*std::move(snapshot)).ok());
  const v1::InitResponse response =
      InitAt(restored, Valueless(2, kConfig, DefaultChunks()), kStart);
  EXPECT_FALSE(response.send_values() || response.values_pending());
  EXPECT_THAT(response.versions(), ElementsAre(0, 1));
  EXPECT_THAT(response.next_steps(), ElementsAre(0, 1));
  EXPECT_EQ(response.history_epoch(), kHistoryEpoch + 1);
  ASSERT_EQ(response.fingerprints_size(), 2);
  EXPECT_EQ(response.fingerprints(1),
            ChunkFingerprint(Weights(restored, kKeyB, kNumelB)));
}

TEST(ShardInitValuesTest, DifferentValuesGetTheShardsFingerprint) {
  auto shard = StartShard(kConfig, DefaultChunks(), ElectionOptions());
  const v1::InitRequest other = Valueless(1, kConfig, OtherChunks());
  const v1::InitResponse response = InitAt(*shard, other, kStart);
  ASSERT_EQ(response.fingerprints_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(response.fingerprints(i), other.chunks(i).fingerprint());
    EXPECT_EQ(response.fingerprints(i),
              ChunkFingerprint(DefaultChunks()[i].initial));
  }
}

TEST(ShardInitValuesTest, MismatchedDeclarationsAreRefusedAsBefore) {
  auto shard = StartShard(kConfig, DefaultChunks(), ElectionOptions());
  const uint64_t digest = shard->StateDigest();
  v1::InitResponse response;
  // Another numel.
  v1::InitRequest numel = Valueless(1, kConfig, DefaultChunks());
  numel.mutable_chunks(0)->mutable_initial()->set_numel(kNumelA + 1);
  EXPECT_THAT(shard->Init(numel, &response).message(),
              HasSubstr("with numel 9 but the accepted Init had 8"));
  // A chunk fewer.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard->Init(Valueless(1, kConfig, {DefaultChunks()[0]}), &response)));
  // Another config.
  EXPECT_TRUE(absl::IsFailedPrecondition(shard->Init(
      Valueless(1, Config(3, v1::CONSISTENCY_MODE_ASP), DefaultChunks()),
      &response)));
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardInitValuesTest, InvalidValuelessInitIsNotElected) {
  Shard shard(ElectionOptions());
  v1::InitResponse response;
  v1::InitRequest zero = Valueless(0, kConfig, DefaultChunks());
  zero.mutable_chunks(1)->mutable_initial()->set_numel(0);
  EXPECT_THAT(shard.Init(zero, &response, kStart).message(),
              HasSubstr("chunk 19: numel 0 is outside"));
  v1::InitRequest twice = Valueless(0, kConfig, DefaultChunks());
  twice.mutable_chunks(1)->set_key(kKeyA);
  EXPECT_THAT(shard.Init(twice, &response, kStart).message(),
              HasSubstr("declared twice"));
  v1::InitRequest with_values = InitRequest(0, kConfig, DefaultChunks());
  with_values.set_values_omitted(true);
  EXPECT_THAT(shard.Init(with_values, &response, kStart).message(),
              HasSubstr("values_omitted"));
  EXPECT_TRUE(absl::IsOutOfRange(
      shard.Init(Valueless(3, kConfig, DefaultChunks()), &response, kStart)));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard.Init(Valueless(0, kConfig, DefaultChunks(), kShardId + 1),
                 &response, kStart)));
  // None of them took the election: the next valid caller is elected.
  EXPECT_TRUE(InitAt(shard, Valueless(2, kConfig, DefaultChunks()), kStart)
                  .send_values());
  EXPECT_FALSE(shard.initialized());
}

TEST(ShardInitValuesTest, PerWorkerReplicasAnswerNoFingerprints) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_ASP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.5);
  config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  ShardOptions options = ElectionOptions();
  options.async_pull_deltas = AsyncPullDeltas::kPerWorker;
  auto shard = StartShard(config, DefaultChunks(), options);
  const v1::InitResponse response =
      InitAt(*shard, Valueless(1, config, DefaultChunks()), kStart);
  EXPECT_THAT(response.versions(), ElementsAre(0, 0));
  EXPECT_EQ(response.fingerprints_size(), 0);
  EXPECT_EQ(response.fingerprint_versions_size(), 0);
}

TEST(ShardInitValuesTest, SharedDeltasAnswerTheShadowsFingerprint) {
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  auto shard = StartShard(config, DefaultChunks(), ElectionOptions());
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  const v1::InitResponse response =
      InitAt(*shard, Valueless(0, config, DefaultChunks()), kStart);
  ASSERT_EQ(response.fingerprints_size(), 2);
  // A worker holding nothing is sent the shadow (which the published delta
  // moved only part of the way to the weights) at its version.
  v1::PullRequest pull;
  pull.set_worker_id(0);
  pull.set_allow_delta(true);
  pull.add_chunks()->set_key(kKeyA);
  v1::PullResponse pulled;
  ASSERT_TRUE(shard->Pull(pull, absl::InfinitePast(), &pulled).ok());
  ASSERT_FALSE(pulled.chunks(0).is_delta());
  EXPECT_EQ(response.fingerprints(0),
            ChunkFingerprint(Decoded(pulled.chunks(0).data(), kNumelA)));
  EXPECT_EQ(response.fingerprint_versions(0), pulled.chunks(0).version());
  EXPECT_EQ(response.fingerprint_versions(0), 1u);
}

// The answer's fingerprint is hashed once per version of what a pull
// answers (ChunkState::answer_fingerprint) and follows every update: each
// Init between two updates gives the same, each update a new one, for the
// weights and for the shared shadow alike.
TEST(ShardInitValuesTest, FingerprintsFollowEveryUpdateAcrossRepeatedInits) {
  v1::TrainingConfig with_deltas = Config(1, v1::CONSISTENCY_MODE_BSP);
  with_deltas.mutable_pull_encoding()->set_compressor("topk");
  with_deltas.mutable_pull_encoding()->set_ratio(0.25);
  with_deltas.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  for (const v1::TrainingConfig& config :
       {Config(1, v1::CONSISTENCY_MODE_BSP), with_deltas}) {
    auto shard = StartShard(config, DefaultChunks(), ElectionOptions());
    uint64_t previous = 0;
    for (uint64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(Push(*shard, DensePush(0, step, kKeyA, kNumelA)).ok());
      v1::PullRequest pull;
      pull.set_worker_id(0);
      pull.set_allow_delta(true);
      pull.add_chunks()->set_key(kKeyA);
      v1::PullResponse pulled;
      ASSERT_TRUE(shard->Pull(pull, absl::InfinitePast(), &pulled).ok());
      ASSERT_FALSE(pulled.chunks(0).is_delta());
      const uint64_t expected =
          ChunkFingerprint(Decoded(pulled.chunks(0).data(), kNumelA));
      for (int again = 0; again < 2; ++again) {
        const v1::InitResponse response =
            InitAt(*shard, Valueless(0, config, DefaultChunks()), kStart);
        ASSERT_EQ(response.fingerprints_size(), 2);
        EXPECT_EQ(response.fingerprints(0), expected) << "step " << step;
        EXPECT_EQ(response.fingerprint_versions(0), pulled.chunks(0).version());
      }
      EXPECT_NE(expected, previous);
      previous = expected;
    }
  }
}

}  // namespace
}  // namespace gradwire
