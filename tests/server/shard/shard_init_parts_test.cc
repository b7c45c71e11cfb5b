// Start-up of any size: an Init in parts (InitRequest.values_parts,
// init_parts.h), pull answers in rounds (PullRequest.allow_partial), the
// refusal of a model the shard's memory limit cannot hold, and the order of
// the Init's journal record before any push.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/shard/init_budget.h"
#include "server/shard/shard.h"
#include "server/shard/shard_config.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

constexpr uint64_t kBigNumel = 1000;

// Four chunks of kBigNumel elements each.
std::vector<ChunkSpec> FourChunks() {
  std::vector<ChunkSpec> chunks;
  for (uint64_t key : {3, 5, 8, 13}) {
    chunks.push_back({key, InitialWeights(key, kBigNumel)});
  }
  return chunks;
}

// `whole` as parts of `per_part` declarations each.
std::vector<v1::InitRequest> Parts(const v1::InitRequest& whole, int per_part) {
  const int count = (whole.chunks_size() + per_part - 1) / per_part;
  std::vector<v1::InitRequest> parts;
  for (int p = 0; p < count; ++p) {
    v1::InitRequest part = whole;
    part.clear_chunks();
    part.set_values_part(p);
    part.set_values_parts(count);
    for (int i = p * per_part;
         i < std::min(whole.chunks_size(), (p + 1) * per_part); ++i) {
      *part.add_chunks() = whole.chunks(i);
    }
    parts.push_back(part);
  }
  return parts;
}

v1::InitRequest WholeInit(uint32_t worker = 0) {
  return InitRequest(worker, Config(2, v1::CONSISTENCY_MODE_BSP), FourChunks());
}

absl::Status SendInit(Shard& shard, const v1::InitRequest& request,
                      v1::InitResponse* response = nullptr) {
  v1::InitResponse ignored;
  return shard.Init(request, response != nullptr ? response : &ignored);
}

TEST(ShardInitPartsTest, PartsInstallWhatTheWholeInitInstalls) {
  Shard whole(Options());
  ASSERT_TRUE(SendInit(whole, WholeInit()).ok());
  Shard in_parts(Options());
  const std::vector<v1::InitRequest> parts = Parts(WholeInit(), 1);
  ASSERT_EQ(parts.size(), 4u);
  for (size_t p = 0; p + 1 < parts.size(); ++p) {
    v1::InitResponse response;
    ASSERT_TRUE(SendInit(in_parts, parts[p], &response).ok());
    EXPECT_EQ(response.values_parts_received(), p + 1);
    EXPECT_FALSE(response.initialized_now());
    EXPECT_TRUE(response.versions().empty());
    EXPECT_EQ(response.max_message_bytes(), Options().max_message_bytes);
    EXPECT_FALSE(in_parts.initialized());
    // A pull or push before the last part finds no shard.
    EXPECT_EQ(PullDense(in_parts, 3).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  v1::InitResponse last;
  ASSERT_TRUE(SendInit(in_parts, parts.back(), &last).ok());
  EXPECT_TRUE(last.initialized_now());
  EXPECT_TRUE(in_parts.initialized());
  EXPECT_EQ(in_parts.StateDigest(), whole.StateDigest());
  EXPECT_EQ(Weights(in_parts, 13, kBigNumel), InitialWeights(13, kBigNumel));
  // The Init without values then answers every chunk, as for the whole.
  v1::InitRequest valueless = WholeInit();
  valueless.set_values_omitted(true);
  for (v1::ChunkDeclaration& chunk : *valueless.mutable_chunks()) {
    chunk.mutable_initial()->clear_dense();
  }
  v1::InitResponse full;
  ASSERT_TRUE(SendInit(in_parts, valueless, &full).ok());
  EXPECT_EQ(full.versions_size(), 4);
  EXPECT_EQ(full.fingerprints_size(), 4);
}

TEST(ShardInitPartsTest, APartOutOfOrderIsRefusedAndPartZeroStartsOver) {
  Shard shard(Options());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const auto send = [&shard](const v1::InitRequest& request, absl::Time now,
                             v1::InitResponse* response) {
    return shard.Init(request, response, now);
  };
  v1::InitResponse answer;
  const std::vector<v1::InitRequest> parts = Parts(WholeInit(), 2);
  // Part 1 with nothing held: start over.
  absl::Status refused = send(parts[1], t0, &answer);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  EXPECT_NE(refused.message().find("send part 0 again"), std::string::npos);
  ASSERT_TRUE(send(parts[0], t0, &answer).ok());
  // Part 1 from another worker does not continue worker 0's parts.
  const std::vector<v1::InitRequest> foreign = Parts(WholeInit(1), 2);
  answer.Clear();
  refused = send(foreign[1], t0, &answer);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  // Another config does not either.
  v1::InitRequest other_config = parts[1];
  other_config.mutable_config()->mutable_optimizer()->set_learning_rate(0.25f);
  refused = send(other_config, t0, &answer);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  // Worker 1's part 0 while worker 0's parts are fresh: wait for them.
  answer.Clear();
  ASSERT_TRUE(send(foreign[0], t0 + absl::Seconds(1), &answer).ok());
  EXPECT_TRUE(answer.values_pending());
  EXPECT_EQ(answer.values_provider(), 0u);
  EXPECT_GT(answer.retry_after_ms(), 0u);
  EXPECT_FALSE(shard.initialized());
  // Worker 0 silent past the values timeout: worker 1 starts over, and
  // completes.
  const absl::Time late = t0 + Options().init_values_timeout;
  answer.Clear();
  ASSERT_TRUE(send(foreign[0], late, &answer).ok());
  EXPECT_EQ(answer.values_parts_received(), 1u);
  answer.Clear();
  ASSERT_TRUE(send(foreign[1], late, &answer).ok());
  EXPECT_TRUE(answer.initialized_now());
  // Worker 0's late part (a retry) is acknowledged as complete, and
  // changes nothing.
  const uint64_t digest = shard.StateDigest();
  v1::InitResponse acknowledged;
  ASSERT_TRUE(send(parts[1], late, &acknowledged).ok());
  EXPECT_EQ(acknowledged.values_parts_received(), 2u);
  EXPECT_FALSE(acknowledged.initialized_now());
  EXPECT_EQ(shard.StateDigest(), digest);
}

TEST(ShardInitPartsTest, MalformedPartsAreRefused) {
  Shard shard(Options());
  v1::InitRequest part = Parts(WholeInit(), 2)[0];
  part.set_values_part(2);
  EXPECT_EQ(SendInit(shard, part).code(), absl::StatusCode::kInvalidArgument);
  part.set_values_part(0);
  part.set_values_parts(kMaxInitParts + 1);
  EXPECT_EQ(SendInit(shard, part).code(), absl::StatusCode::kInvalidArgument);
  // A chunk declared by two parts.
  std::vector<v1::InitRequest> parts = Parts(WholeInit(), 2);
  *parts[1].mutable_chunks(0) = parts[0].chunks(0);
  ASSERT_TRUE(SendInit(shard, parts[0]).ok());
  const absl::Status twice = SendInit(shard, parts[1]);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument) << twice;
  EXPECT_FALSE(shard.initialized());
}

// What a shard journals, in memory; Append of an Init record can be held
// until the test releases it.
class GatedJournal final : public ShardJournal {
 public:
  explicit GatedJournal(bool hold_init) : hold_init_(hold_init) {}

  uint64_t Append(JournalRecordType type, std::string payload) override {
    if (type == JournalRecordType::kInit && hold_init_) {
      init_appending_.Notify();
      release_.WaitForNotification();
    }
    absl::MutexLock lock(&mu_);
    records_.push_back({type, std::move(payload)});
    return records_.size();
  }
  void WaitDurable(uint64_t) override {}

  std::vector<std::pair<JournalRecordType, std::string>> records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }

  absl::Notification init_appending_;
  absl::Notification release_;

 private:
  const bool hold_init_;
  absl::Mutex mu_;
  std::vector<std::pair<JournalRecordType, std::string>> records_
      ABSL_GUARDED_BY(mu_);
};

TEST(ShardInitPartsTest, ReplayingTheJournaledPartsRebuildsTheShard) {
  GatedJournal journal(/*hold_init=*/false);
  ShardOptions options = Options();
  // One chunk of 4000 bytes per journal record.
  options.max_message_bytes = 6000;
  Shard shard(options);
  shard.set_journal(&journal);
  const std::vector<v1::InitRequest> parts = Parts(WholeInit(), 3);
  ASSERT_EQ(parts.size(), 2u);
  for (const v1::InitRequest& part : parts) {
    ASSERT_TRUE(SendInit(shard, part).ok());
  }
  ASSERT_TRUE(Push(shard, DensePush(0, 0, 3, kBigNumel)).ok());
  ASSERT_TRUE(Push(shard, DensePush(1, 0, 3, kBigNumel)).ok());
  // The parts are journaled once complete, in a row, before the pushes,
  // re-cut to the message size: one chunk each.
  const auto records = journal.records();
  ASSERT_EQ(records.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(records[i].first, JournalRecordType::kInit);
    v1::InitRequest part;
    ASSERT_TRUE(part.ParseFromString(records[i].second));
    EXPECT_EQ(part.values_part(), static_cast<uint32_t>(i));
    EXPECT_EQ(part.values_parts(), 4u);
    EXPECT_EQ(part.chunks_size(), 1);
  }
  Shard replayed(options);
  for (const auto& [type, payload] : records) {
    if (type == JournalRecordType::kInit) {
      v1::InitRequest request;
      ASSERT_TRUE(request.ParseFromString(payload));
      ASSERT_TRUE(SendInit(replayed, request).ok());
    } else {
      v1::PushRequest request;
      ASSERT_TRUE(request.ParseFromString(payload));
      ASSERT_TRUE(Push(replayed, request).ok());
    }
  }
  EXPECT_EQ(replayed.StateDigest(), shard.StateDigest());
}

TEST(ShardInitPartsTest, APushRacingTheInitIsNeverJournaledBeforeIt) {
  GatedJournal journal(/*hold_init=*/true);
  Shard shard(Options());
  shard.set_journal(&journal);
  std::thread init([&] {
    EXPECT_TRUE(
        SendInit(shard, InitRequest(0, Config(1, v1::CONSISTENCY_MODE_BSP),
                                    DefaultChunks()))
            .ok());
  });
  journal.init_appending_.WaitForNotification();
  // The Init is being journaled: a push now must not be accepted (and so
  // logged) ahead of it.
  const auto pushed = Push(shard, DensePush(0, 0, kKeyA, kNumelA));
  journal.release_.Notify();
  init.join();
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kFailedPrecondition)
      << pushed.status();
  const auto records = journal.records();
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.front().first, JournalRecordType::kInit);
  EXPECT_EQ(records.size(), 1u);
  // Once the Init is in, pushes go on.
  EXPECT_TRUE(Push(shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
}

TEST(ShardInitPartsTest, AModelOverTheMemoryLimitIsRefusedAtStartUp) {
  ShardOptions options = Options();
  options.max_message_bytes = 4096;
  // Room for the two messages and 1000 elements of SGD + BSP state (8
  // bytes each); the model has 4000.
  options.memory_limit_bytes = 2 * 4096 + 1000 * 8;
  Shard shard(options);
  v1::InitRequest valueless = WholeInit();
  valueless.set_values_omitted(true);
  for (v1::ChunkDeclaration& chunk : *valueless.mutable_chunks()) {
    chunk.mutable_initial()->clear_dense();
  }
  v1::InitResponse answer;
  absl::Status refused = shard.Init(valueless, &answer);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("4000 elements"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("8 bytes per element"), std::string::npos);
  EXPECT_NE(refused.message().find("--memory-limit-bytes"), std::string::npos);
  EXPECT_FALSE(answer.send_values());
  // The whole Init and the parts are refused too, with nothing installed.
  EXPECT_EQ(SendInit(shard, WholeInit()).code(),
            absl::StatusCode::kResourceExhausted);
  const std::vector<v1::InitRequest> parts = Parts(WholeInit(), 1);
  EXPECT_TRUE(SendInit(shard, parts[0]).ok());
  EXPECT_EQ(SendInit(shard, parts[1]).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(shard.initialized());
  // With the limit off, it starts.
  options.memory_limit_bytes = 0;
  Shard unlimited(options);
  EXPECT_TRUE(SendInit(unlimited, WholeInit()).ok());
  // Room for the state once (32,000 bytes) but not for a checkpoint's copy
  // of it beside.
  options.memory_limit_bytes = 2 * 4096 + 4000 * 8;
  Shard fits(options);
  EXPECT_TRUE(SendInit(fits, WholeInit()).ok());
  options.checkpoints = true;
  Shard checkpointed(options);
  refused = SendInit(checkpointed, WholeInit());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("twice while a checkpoint copies it"),
            std::string::npos)
      << refused;
}

TEST(ShardInitPartsTest, ModelStateBytesCountEachBuffer) {
  ShardOptions options = Options();
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_ADAMW);
  config.mutable_optimizer()->set_beta2(0.999f);
  config.mutable_optimizer()->set_epsilon(1e-8f);
  auto adam_bsp = ShardConfig::FromProto(config, options);
  ASSERT_TRUE(adam_bsp.ok()) << adam_bsp.status();
  // Weights, step sum, two moments.
  EXPECT_EQ(ModelStateBytesPerElement(**adam_bsp), 16u);
  config = Config(2, v1::CONSISTENCY_MODE_ASP);
  auto sgd_asp = ShardConfig::FromProto(config, options);
  ASSERT_TRUE(sgd_asp.ok()) << sgd_asp.status();
  EXPECT_EQ(ModelStateBytesPerElement(**sgd_asp), 4u);
}

TEST(ShardInitPartsTest, APartialPullAnswersTheChunksThatFit) {
  ShardOptions options = Options();
  // One chunk's dense answer (4000 bytes and overhead) fits, two do not.
  options.max_message_bytes = 6000;
  options.memory_limit_bytes = 0;
  auto shard =
      StartShard(Config(1, v1::CONSISTENCY_MODE_BSP), FourChunks(), options);
  v1::PullRequest request;
  request.set_worker_id(0);
  for (uint64_t key : {13, 3, 8}) request.add_chunks()->set_key(key);
  v1::PullResponse response;
  const absl::Status refused =
      shard->Pull(request, absl::Now() + absl::Seconds(5), &response);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  request.set_allow_partial(true);
  ASSERT_TRUE(
      shard->Pull(request, absl::Now() + absl::Seconds(5), &response).ok());
  EXPECT_TRUE(response.partial());
  ASSERT_EQ(response.chunks_size(), 1);
  EXPECT_EQ(response.chunks(0).key(), 13u);
  EXPECT_EQ(Decoded(response.chunks(0).data(), kBigNumel),
            InitialWeights(13, kBigNumel));
  // The last chunk alone: complete.
  request.mutable_chunks()->DeleteSubrange(0, 2);
  response.Clear();
  ASSERT_TRUE(
      shard->Pull(request, absl::Now() + absl::Seconds(5), &response).ok());
  EXPECT_FALSE(response.partial());
  ASSERT_EQ(response.chunks_size(), 1);
  EXPECT_EQ(response.chunks(0).key(), 8u);
  // A chunk that alone does not fit is refused even so.
  ShardOptions tiny = options;
  tiny.max_message_bytes = 2048;
  auto small =
      StartShard(Config(1, v1::CONSISTENCY_MODE_BSP), FourChunks(), tiny);
  EXPECT_EQ(
      small->Pull(request, absl::Now() + absl::Seconds(5), &response).code(),
      absl::StatusCode::kResourceExhausted);
  // A pull naming no chunk answers nothing, with or without allow_partial.
  v1::PullRequest empty;
  for (bool partial : {false, true}) {
    empty.set_allow_partial(partial);
    response.Clear();
    ASSERT_TRUE(
        shard->Pull(empty, absl::Now() + absl::Seconds(5), &response).ok());
    EXPECT_EQ(response.chunks_size(), 0);
    EXPECT_FALSE(response.partial());
  }
}

}  // namespace
}  // namespace gradwire
