// Every order of the events a shard journals around a worker that fails,
// generated rather than hand-listed, under BSP, SSP and ASP: each sequence of
// up to kLength events over
//   P  a step: workers 0 and 1 push their next step, and worker 2 too while
//      it takes part;
//   D  worker 2 falls silent and the shard drops it;
//   J  worker 2 comes back by Init;
//   R  worker 2 comes back by pushing its next step;
//   C  a checkpoint (the log rotated, as the server writes one);
// with at least one drop and one checkpoint, runs on a shard with its
// write-ahead log, which is then killed and restarted from its directory.
// The restarted shard must equal, bit for bit and in its live set, a shard
// that ran the same requests without a crash, and take the next step as it
// does. Requests a shard refuses are part of the sequence too (both refuse
// them alike); the model of the shard is the uninterrupted shard itself.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/durability/durable_shard_util.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT: test helpers

constexpr uint32_t kWorkers = 3;
constexpr uint32_t kFlaky = 2;
constexpr int kLength = 4;
constexpr char kEvents[] = "PDJRC";

struct Mode {
  const char* name;
  v1::ConsistencyMode mode;
  uint32_t staleness;
};

v1::TrainingConfig ModeConfig(const Mode& mode) {
  v1::TrainingConfig config = Config(kWorkers, mode.mode, mode.staleness);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  return config;
}

// Sends one sequence's requests to a shard and keeps the workers' side:
// each worker's next step, and whether worker 2 takes part.
class Driver {
 public:
  Driver(Shard* shard, const Mode& mode) : shard_(shard), mode_(mode) {}

  void Start() {
    Init(0);
    Event('P');
  }

  // One event; a checkpoint needs `dir` and `wal` (null: none is written,
  // as on the uninterrupted shard).
  void Event(char event, const std::string& dir = "",
             WriteAheadLog* wal = nullptr) {
    switch (event) {
      case 'P':
        for (uint32_t worker = 0; worker < kWorkers; ++worker) {
          if (worker != kFlaky || present_) PushStep(worker);
        }
        break;
      case 'D':
        present_ = false;
        EXPECT_TRUE(shard_->DropWorker(kFlaky).ok());
        break;
      case 'J':
        present_ = true;
        Init(kFlaky);
        break;
      case 'R':
        present_ = true;
        PushStep(kFlaky);
        break;
      case 'C':
        if (wal != nullptr) {
          durable_test::WriteCheckpointNow(*shard_, dir, kShardId, wal);
        }
        break;
    }
  }

  void set_shard(Shard* shard) { shard_ = shard; }
  uint64_t next_step(uint32_t worker) const { return next_step_[worker]; }

 private:
  void Init(uint32_t worker) {
    v1::InitResponse response;
    EXPECT_TRUE(
        shard_
            ->Init(InitRequest(worker, ModeConfig(mode_), DefaultChunks()),
                   &response)
            .ok());
  }

  // Both chunks of the worker's next step, in one push; the step counts as
  // pushed when the shard accepted it (applied or a duplicate).
  void PushStep(uint32_t worker) {
    v1::PushRequest request =
        DensePush(worker, next_step_[worker], kKeyA, kNumelA);
    *request.add_chunks() =
        DensePush(worker, next_step_[worker], kKeyB, kNumelB).chunks(0);
    if (Push(*shard_, request).ok()) ++next_step_[worker];
  }

  Shard* shard_;
  const Mode mode_;
  uint64_t next_step_[kWorkers] = {0, 0, 0};
  bool present_ = true;
};

// The sequences of up to kLength events with a drop and a checkpoint.
std::vector<std::string> Sequences() {
  std::vector<std::string> all = {""};
  std::vector<std::string> wanted;
  for (int length = 1; length <= kLength; ++length) {
    std::vector<std::string> longer;
    for (const std::string& prefix : all) {
      for (const char* e = kEvents; *e != '\0'; ++e) {
        longer.push_back(prefix + *e);
      }
    }
    all = std::move(longer);
    for (const std::string& sequence : all) {
      if (sequence.find('D') != std::string::npos &&
          sequence.find('C') != std::string::npos) {
        wanted.push_back(sequence);
      }
    }
  }
  return wanted;
}

// Runs `sequence` with a log in `dir`, kills the shard, restarts it and
// compares it with the uninterrupted shard, before and after one more step.
void CheckSequence(const Mode& mode, const std::string& sequence) {
  SCOPED_TRACE(std::string(mode.name) + " " + sequence);
  durable_test::TempDirectory dir;
  Driver crashed_driver(nullptr, mode);
  {
    auto wal = durable_test::OpenLog(dir.path(), kShardId);
    ASSERT_NE(wal, nullptr);
    Shard shard(Options());
    shard.set_journal(wal.get());
    crashed_driver.set_shard(&shard);
    crashed_driver.Start();
    for (char event : sequence)
      crashed_driver.Event(event, dir.path(), wal.get());
    // Killed: nothing more is written.
  }
  Shard reference(Options());
  Driver reference_driver(&reference, mode);
  reference_driver.Start();
  for (char event : sequence) reference_driver.Event(event);
  std::unique_ptr<Shard> restored =
      durable_test::RestartFrom(dir.path(), Options());
  ASSERT_NE(restored, nullptr);
  ASSERT_TRUE(restored->initialized());
  ASSERT_NO_FATAL_FAILURE(
      durable_test::ExpectSameState(*restored, reference, kWorkers));
  // The next step is taken alike.
  crashed_driver.set_shard(restored.get());
  crashed_driver.Event('P');
  reference_driver.Event('P');
  for (uint32_t worker = 0; worker < kWorkers; ++worker) {
    EXPECT_EQ(crashed_driver.next_step(worker),
              reference_driver.next_step(worker))
        << "worker " << worker;
  }
  durable_test::ExpectSameState(*restored, reference, kWorkers);
}

class ReplayOrdersTest : public ::testing::TestWithParam<Mode> {};

TEST_P(ReplayOrdersTest, EveryOrderOfDropRejoinCheckpointAndKillRestores) {
  const std::vector<std::string> sequences = Sequences();
  ASSERT_EQ(sequences.size(), 2u + 24u + 194u);
  for (const std::string& sequence : sequences) {
    CheckSequence(GetParam(), sequence);
    if (::testing::Test::HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ReplayOrdersTest,
    ::testing::Values(Mode{"BSP", v1::CONSISTENCY_MODE_BSP, 0},
                      Mode{"SSP", v1::CONSISTENCY_MODE_SSP, 1},
                      Mode{"ASP", v1::CONSISTENCY_MODE_ASP, 0}),
    [](const ::testing::TestParamInfo<Mode>& info) { return info.param.name; });

}  // namespace
}  // namespace gradwire
