// A restart whose flags disagree with the job that wrote the durable state
// is a configuration conflict, not lost data: FAILED_PRECONDITION naming the
// flag and both values, nothing changed, and --discard-unreadable-state
// does not move the state aside.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/durability/durable_state.h"
#include "server/durability/write_ahead_log.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

constexpr uint32_t kLoggedWorkers = 2;

class ConfigConflictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "config_conflict.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/shard";
  }
  void TearDown() override { fs::remove_all(root_); }

  // A job of kLoggedWorkers workers that wrote only its write-ahead log
  // (no checkpoint): Init and two steps.
  void WriteLogOnly() {
    auto wal = WriteAheadLog::Open({dir_});
    ASSERT_TRUE(wal.ok()) << wal.status();
    Shard shard(Options());
    shard.set_journal(wal->get());
    v1::InitResponse response;
    ASSERT_TRUE(
        shard
            .Init(
                InitRequest(0, Config(kLoggedWorkers, v1::CONSISTENCY_MODE_BSP),
                            DefaultChunks()),
                &response)
            .ok());
    for (uint64_t step = 0; step < 2; ++step) {
      for (uint32_t worker = 0; worker < kLoggedWorkers; ++worker) {
        ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyA, kNumelA)).ok());
      }
    }
  }

  DurableStateOptions Durable(bool discard) const {
    DurableStateOptions options;
    options.dir = dir_;
    options.replay_log = true;
    options.discard_unreadable = discard;
    return options;
  }

  size_t FilesInDir() const {
    size_t count = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.is_regular_file()) ++count;
    }
    return count;
  }

  std::string root_;
  std::string dir_;
};

TEST_F(ConfigConflictTest, ALogOnlyRestartWithOtherNumWorkersNamesTheFlag) {
  ASSERT_NO_FATAL_FAILURE(WriteLogOnly());
  ShardOptions options = Options();
  options.num_workers = kLoggedWorkers + 1;
  options.history_epoch = 0;
  Shard shard(options);
  DurableStateOptions durable = Durable(/*discard=*/false);
  durable.num_workers = options.num_workers;
  absl::StatusOr<RestoredDurableState> restored =
      RestoreDurableState(durable, &shard);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition)
      << restored.status();
  const std::string message(restored.status().message());
  EXPECT_NE(message.find("--num-workers=3"), std::string::npos) << message;
  EXPECT_NE(message.find("2 workers"), std::string::npos) << message;
  EXPECT_NE(message.find("--num-workers=2"), std::string::npos) << message;
  EXPECT_FALSE(shard.initialized());
}

TEST_F(ConfigConflictTest, DiscardUnreadableStateKeepsAConflictingLog) {
  ASSERT_NO_FATAL_FAILURE(WriteLogOnly());
  const size_t files = FilesInDir();
  ShardOptions options = Options();
  options.num_workers = kLoggedWorkers + 1;
  Shard shard(options);
  DurableStateOptions durable = Durable(/*discard=*/true);
  durable.num_workers = options.num_workers;
  absl::StatusOr<RestoredDurableState> restored = RestoreOrDiscardDurableState(
      durable, [&shard]() -> absl::StatusOr<Shard*> { return &shard; });
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FilesInDir(), files);
}

TEST_F(ConfigConflictTest, TheSameNumWorkersOrNoneRestores) {
  ASSERT_NO_FATAL_FAILURE(WriteLogOnly());
  for (const uint32_t flag : {kLoggedWorkers, 0u}) {
    ShardOptions options = Options();
    options.num_workers = flag;
    Shard shard(options);
    DurableStateOptions durable = Durable(/*discard=*/false);
    durable.num_workers = flag;
    absl::StatusOr<RestoredDurableState> restored =
        RestoreDurableState(durable, &shard);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(restored->replay.pushes_applied, 2u * kLoggedWorkers);
    EXPECT_TRUE(shard.initialized());
  }
}

}  // namespace
}  // namespace gradwire
