// Workers that die under a BSP shard: a silent worker is dropped after
// --worker-timeout-seconds and the step completes with the others' pushes;
// with --worker-timeout-seconds=0 nobody is ever dropped; and a real
// gradwire-worker SIGKILLed mid-training is dropped, the other two go on
// within about the timeout, and the killed worker started again rejoins at
// the current step and finishes with the others' weights.
#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

double JsonNumber(const std::string& json, const std::string& key) {
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(SummaryField(json, key), &value))
      << key << " in " << json;
  return value;
}

// The shard's stderr once it holds `text`, or after 5 s: a log line may be
// written just after the call that caused it has returned.
std::string StderrOnceItHas(const ServerProcess& shard,
                            const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  std::string log = shard.Stderr();
  while (log.find(text) == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    log = shard.Stderr();
  }
  return log;
}

v1::ShardInfo Info(const ServerProcess& shard) {
  auto stub = shard.NewStub();
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(2));
  v1::ShardInfo info;
  const grpc::Status s = stub->GetInfo(&context, v1::GetInfoRequest(), &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

// Waits until the shard's slowest chunk clock reaches `clock`; false after
// `timeout`.
bool WaitForClock(const ServerProcess& shard, uint64_t clock,
                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Info(shard).min_clock() >= clock) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

absl::Status PushDense(v1::ParameterServer::Stub* stub, uint32_t worker,
                       uint64_t step, uint64_t key,
                       const std::vector<float>& gradient) {
  v1::PushRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  v1::ChunkGradient* chunk = request.add_chunks();
  chunk->set_key(key);
  *chunk->mutable_gradient() = DenseData(gradient);
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::PushResponse response;
  return ToAbsl(stub->Push(&context, request, &response));
}

// One shard of two BSP workers in which only worker 0 pushes step 0.
class SilentWorkerTest : public ::testing::Test {
 protected:
  void StartWithTimeout(const std::string& seconds) {
    auto shard = ServerProcess::Start({"--num-workers=2", "--mode=bsp",
                                       "--worker-timeout-seconds=" + seconds,
                                       "--metrics-port=-1"});
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    stub_ = shard_->NewStub();
    ASSERT_TRUE(InitBspWorkers(stub_.get(), chunks_, 2).ok());
    ASSERT_TRUE(PushDense(stub_.get(), 0, 0, 0, gradient_).ok());
  }

  const std::vector<TestChunk> chunks_ = MakeChunks({256}, 7);
  const std::vector<float> gradient_ = RandomValues(256, 11, 0.5f);
  std::unique_ptr<ServerProcess> shard_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(SilentWorkerTest, TimeoutZeroNeverDropsAWorker) {
  StartWithTimeout("0");
  absl::SleepFor(absl::Milliseconds(1500));
  const v1::ShardInfo info = Info(*shard_);
  EXPECT_EQ(info.live_workers(), 2u);
  EXPECT_EQ(info.min_clock(), 0u);
  // The step still waits for worker 1.
  auto pulled = PullDense(stub_.get(), 0, chunks_, 1, absl::Milliseconds(300));
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(shard_->Stderr(), Not(HasSubstr("dropped")));
}

TEST_F(SilentWorkerTest, SilentWorkerIsDroppedAndRejoinsWithInit) {
  StartWithTimeout("1");
  // Worker 0 waits for step 1: alive while it waits; worker 1 is silent.
  const absl::Time start = absl::Now();
  auto pulled = PullDense(stub_.get(), 0, chunks_, 1, absl::Seconds(10));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(700));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The step's mean over the one worker that pushed: w - lr * g.
  std::vector<float> expected = chunks_[0].initial;
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] -= kLearningRate * gradient_[i];
  }
  EXPECT_LT(MaxRelativeDifference(pulled->at(0), expected), 1e-6);
  v1::ShardInfo info = Info(*shard_);
  EXPECT_EQ(info.live_workers(), 1u);
  EXPECT_EQ(info.min_clock(), 1u);
  EXPECT_THAT(
      StderrOnceItHas(*shard_, "worker 1 dropped from the live set at step 0"),
      HasSubstr("worker 1 dropped from the live set at step 0"));
  // Init again: live, told to resume at the current clock.
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::InitResponse response;
  ASSERT_TRUE(
      stub_
          ->Init(&context,
                 MakeInit(SgdConfig(2, v1::CONSISTENCY_MODE_BSP), chunks_, 1),
                 &response)
          .ok());
  ASSERT_EQ(response.next_steps_size(), 1);
  EXPECT_EQ(response.next_steps(0), 1u);
  EXPECT_EQ(Info(*shard_).live_workers(), 2u);
  EXPECT_THAT(StderrOnceItHas(
                  *shard_, "worker 1 rejoined the live set by Init at step 1"),
              HasSubstr("worker 1 rejoined the live set by Init at step 1"));

  // Revived, it still does not push: dropped again while worker 0 waits on
  // it, and another Init does not bring it back.
  ASSERT_TRUE(PushDense(stub_.get(), 0, 1, 0, gradient_).ok());
  auto again = PullDense(stub_.get(), 0, chunks_, 2, absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  grpc::ClientContext second_context;
  SetTimeout(&second_context);
  ASSERT_TRUE(
      stub_
          ->Init(&second_context,
                 MakeInit(SgdConfig(2, v1::CONSISTENCY_MODE_BSP), chunks_, 1),
                 &response)
          .ok());
  EXPECT_EQ(Info(*shard_).live_workers(), 1u);
  EXPECT_THAT(StderrOnceItHas(*shard_, "worker 1 sent Init while dropped"),
              HasSubstr("worker 1 sent Init while dropped"));
}

// Calls that anyone could repeat are not progress: a worker that only
// re-sends its Init and an old push, and pulls a step it has not pushed
// itself, is dropped like a silent one, and the step completes without it.
TEST_F(SilentWorkerTest, CallsWithoutProgressDoNotKeepAWorkerAlive) {
  StartWithTimeout("1");
  ASSERT_TRUE(PushDense(stub_.get(), 1, 0, 0, gradient_).ok());
  ASSERT_TRUE(PushDense(stub_.get(), 0, 1, 0, gradient_).ok());
  // Worker 0 waits on worker 1 for step 1: progress, so it stays.
  absl::StatusOr<std::map<uint64_t, std::vector<float>>> waited;
  std::thread waiting_worker([&] {
    auto own = shard_->NewStub();
    waited = PullDense(own.get(), 0, chunks_, 2, absl::Seconds(10));
  });
  const v1::InitRequest init =
      MakeInit(SgdConfig(2, v1::CONSISTENCY_MODE_BSP), chunks_, 1);
  const absl::Time until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < until && Info(*shard_).live_workers() == 2) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    EXPECT_TRUE(stub_->Init(&context, init, &response).ok());
    // Its step-0 push again: a duplicate.
    EXPECT_TRUE(PushDense(stub_.get(), 1, 0, 0, gradient_).ok());
    // Waits for step 1, which waits for its own push (answered only once
    // the worker is dropped).
    PullDense(stub_.get(), 1, chunks_, 2, absl::Milliseconds(300))
        .status()
        .IgnoreError();
  }
  // Dropped while it was still calling, not after it stopped.
  EXPECT_EQ(Info(*shard_).live_workers(), 1u);
  EXPECT_LT(absl::Now(), until);
  waiting_worker.join();
  EXPECT_TRUE(waited.ok()) << waited.status();
  const v1::ShardInfo info = Info(*shard_);
  EXPECT_EQ(info.live_workers(), 1u);
  EXPECT_EQ(info.min_clock(), 2u);
  EXPECT_THAT(
      StderrOnceItHas(*shard_, "worker 1 dropped from the live set at step 1"),
      HasSubstr("worker 1 dropped from the live set at step 1"));
}

class KilledWorkerTest : public ::testing::Test {
 protected:
  static constexpr int kWorkers = 3;
  static constexpr int kSteps = 150;

  std::vector<std::string> WorkerCommand(int worker,
                                         const std::string& summary) const {
    const char* binary = std::getenv("GRADWIRE_WORKER_BIN");
    return {binary == nullptr ? "" : binary, "--shards=" + shard_->target(),
            absl::StrCat("--worker-id=", worker),
            absl::StrCat("--num-workers=", kWorkers), "--model=mlp",
            absl::StrCat("--max-steps=", kSteps), "--train-limit=30000",
            "--test-limit=500",
            // Paces every worker so that the restart lands mid-training.
            "--step-delay-ms=30", "--progress=log", "--metrics-port=-1",
            "--summary-json=" + summary};
  }

  pid_t Spawn(int worker, const std::string& name) {
    absl::StatusOr<pid_t> pid =
        SpawnProcess(WorkerCommand(worker, Path(name + ".json")),
                     Path(name + ".out"), Path(name + ".err"));
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }

  // Waits for `pid`; its exit code (SIGKILLed and -1 after `timeout`).
  int Reap(pid_t pid, absl::Duration timeout) {
    if (pid < 0) return -1;
    absl::StatusOr<int> code = WaitForExit(pid, timeout);
    if (code.ok()) return *code;
    kill(pid, SIGKILL);
    WaitForExit(pid, absl::Seconds(5)).IgnoreError();
    return -1;
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_.path(), "/", name);
  }
  std::string Log(const std::string& name) const {
    return ReadFileOrEmpty(Path(name + ".out")) +
           ReadFileOrEmpty(Path(name + ".err"));
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> shard_;
};

TEST_F(KilledWorkerTest, OthersGoOnAndTheRestartedWorkerRejoins) {
  if (std::getenv("GRADWIRE_WORKER_BIN") == nullptr) {
    GTEST_SKIP() << "GRADWIRE_WORKER_BIN is not set";
  }
  auto shard =
      ServerProcess::Start({absl::StrCat("--num-workers=", kWorkers),
                            "--mode=bsp", "--worker-timeout-seconds=2"});
  ASSERT_TRUE(shard.ok()) << shard.status();
  shard_ = *std::move(shard);
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    pids.push_back(Spawn(w, absl::StrCat("worker-", w)));
  }
  ASSERT_TRUE(WaitForClock(*shard_, 20, absl::Seconds(40)))
      << shard_->Stderr() << Log("worker-0");

  kill(pids[2], SIGKILL);
  EXPECT_EQ(Reap(pids[2], absl::Seconds(5)), 128 + SIGKILL);
  const absl::Time killed_at = absl::Now();
  // Worker 2 may have pushed step `clock` before it died, so one more step
  // can complete; the one after needs the drop.
  const uint64_t clock = Info(*shard_).min_clock();
  ASSERT_TRUE(WaitForClock(*shard_, clock + 2, absl::Seconds(20)));
  const absl::Duration stalled = absl::Now() - killed_at;
  ASSERT_TRUE(WaitForClock(*shard_, clock + 5, absl::Seconds(10)));
  const absl::Duration resumed = absl::Now() - killed_at;
  std::cout << "killed at step " << clock << "; step " << clock + 2 << " after "
            << absl::FormatDuration(stalled) << ", step " << clock + 5
            << " after " << absl::FormatDuration(resumed) << std::endl;
  EXPECT_GE(stalled, absl::Milliseconds(1500)) << "steps did not wait";
  // The timeout (2 s), up to a watchdog period (0.5 s), and some slack for
  // the two busy cores.
  EXPECT_LT(resumed, absl::Seconds(6));
  EXPECT_EQ(Info(*shard_).live_workers(), 2u);
  EXPECT_THAT(StderrOnceItHas(*shard_, "worker 2 dropped from the live set"),
              HasSubstr("worker 2 dropped from the live set"));

  const pid_t restarted = Spawn(2, "worker-2-again");
  const int restarted_exit = Reap(restarted, absl::Seconds(60));
  std::vector<int> exits;
  for (int w = 0; w < 2; ++w) exits.push_back(Reap(pids[w], absl::Seconds(30)));
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(exits[w], 0) << Log(absl::StrCat("worker-", w));
  }
  ASSERT_EQ(restarted_exit, 0) << Log("worker-2-again");

  const std::string again = ReadFileOrEmpty(Path("worker-2-again.json"));
  EXPECT_THAT(
      StderrOnceItHas(*shard_, "worker 2 rejoined the live set by Init"),
      HasSubstr("worker 2 rejoined the live set by Init"));
  // It resumed from the step the others had reached, not from 0, and ran
  // the rest of the job with them.
  EXPECT_GT(JsonNumber(again, "resumed_at_step"), clock + 2) << again;
  EXPECT_LT(JsonNumber(again, "resumed_at_step"), kSteps) << again;
  EXPECT_EQ(JsonNumber(again, "steps"), kSteps);
  EXPECT_GT(JsonNumber(again, "steps_run"), 0);
  std::vector<std::string> summaries;
  for (int w = 0; w < 2; ++w) {
    summaries.push_back(
        ReadFileOrEmpty(Path(absl::StrCat("worker-", w, ".json"))));
    EXPECT_EQ(JsonNumber(summaries[w], "steps"), kSteps) << summaries[w];
  }
  // It pulled the shard's dense weights at the rejoin and deltas after:
  // every replica ends bit for bit the same.
  const std::string fingerprint =
      SummaryField(summaries[0], "weights_fingerprint");
  EXPECT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ(SummaryField(summaries[1], "weights_fingerprint"), fingerprint);
  EXPECT_EQ(SummaryField(again, "weights_fingerprint"), fingerprint);
  EXPECT_GT(JsonNumber(summaries[0], "test_accuracy"), 0.4) << summaries[0];
}

}  // namespace
}  // namespace gradwire::testing
