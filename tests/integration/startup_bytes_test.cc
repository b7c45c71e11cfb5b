// Start-up with real processes: two gradwire-worker processes against two
// gradwire-server shards. With the same seed one copy of the initial
// weights crosses the wire for the whole job and nothing is pulled back;
// with different seeds the later worker pulls the shards' weights and both
// end identical. Bytes are the workers' client counters, as their
// summaries report them.
#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

constexpr int kSteps = 4;

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

double Number(const std::string& json, const std::string& key) {
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(SummaryField(json, key), &value))
      << key << " in " << json;
  return value;
}

// Bytes of one dense fp32 copy of the model: a step's dense-equivalent
// push carries every chunk once.
double ModelCopyBytes(const std::string& summary) {
  return Number(summary, "dense_equivalent_bytes") /
         Number(summary, "steps_run");
}

double StartupBytes(const std::string& summary) {
  return Number(summary, "startup_sent_bytes") +
         Number(summary, "startup_received_bytes");
}

class StartupBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_ = EnvOrEmpty("GRADWIRE_WORKER_BIN");
    ASSERT_FALSE(worker_.empty()) << "GRADWIRE_WORKER_BIN is not set";
    for (int i = 0; i < 2; ++i) {
      auto shard = ServerProcess::Start({absl::StrCat("--shard-id=", i),
                                         "--num-shards=2", "--num-workers=2"});
      ASSERT_TRUE(shard.ok()) << shard.status();
      addresses_ += (i == 0 ? "" : ",") + (*shard)->target();
      shards_.push_back(std::move(*shard));
    }
  }

  // Starts worker `w` with `seed`; its output goes to files in dir_.
  pid_t StartWorker(int w, int seed) {
    absl::StatusOr<pid_t> pid = SpawnProcess(
        {worker_, "--shards=" + addresses_, absl::StrCat("--worker-id=", w),
         "--num-workers=2", "--model=mlp", absl::StrCat("--max-steps=", kSteps),
         "--train-limit=2000", "--evaluate=false", "--progress=log",
         absl::StrCat("--seed=", seed), "--summary-json=" + SummaryPath(w)},
        absl::StrCat(dir_.path(), "/out-", w),
        absl::StrCat(dir_.path(), "/err-", w));
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }

  // Waits for worker `w` and returns its summary ("" when it failed).
  std::string Finish(int w, pid_t pid) {
    if (pid < 0) return "";
    absl::StatusOr<int> code = WaitForExit(pid, absl::Seconds(120));
    if (!code.ok()) {
      kill(pid, SIGKILL);
      WaitForExit(pid, absl::Seconds(5)).IgnoreError();
    }
    EXPECT_TRUE(code.ok() && *code == 0)
        << "worker " << w << ": "
        << ReadFileOrEmpty(absl::StrCat(dir_.path(), "/err-", w));
    return ReadFileOrEmpty(SummaryPath(w));
  }

  // Whether every shard has its initial values, polled for up to `timeout`.
  bool ShardsInitialised(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      bool all = true;
      for (const auto& shard : shards_) {
        grpc::ClientContext context;
        context.set_deadline(
            absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
        v1::ShardInfo info;
        const grpc::Status s =
            shard->NewStub()->GetInfo(&context, v1::GetInfoRequest(), &info);
        all = all && s.ok() && info.initialized();
      }
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::string SummaryPath(int w) const {
    return absl::StrCat(dir_.path(), "/worker-", w, ".json");
  }

  TempDir dir_;
  std::string worker_;
  std::string addresses_;
  std::vector<std::unique_ptr<ServerProcess>> shards_;
};

TEST_F(StartupBytesTest, SameSeedSendsOneCopyForTheWholeJob) {
  const pid_t first = StartWorker(0, 7);
  const pid_t second = StartWorker(1, 7);
  const std::string summaries[2] = {Finish(0, first), Finish(1, second)};
  ASSERT_FALSE(summaries[0].empty());
  ASSERT_FALSE(summaries[1].empty());
  const double model = ModelCopyBytes(summaries[0]);
  ASSERT_GT(model, 100000) << summaries[0];
  double total = 0;
  for (const std::string& summary : summaries) {
    // Each worker: at most one copy; and nothing pulled back.
    EXPECT_LE(StartupBytes(summary), 1.1 * model) << summary;
    EXPECT_LT(Number(summary, "startup_received_bytes"), 0.01 * model)
        << summary;
    EXPECT_GT(Number(summary, "startup_seconds"), 0) << summary;
    total += StartupBytes(summary);
  }
  // Both workers together: one copy per shard, not one per worker.
  EXPECT_LE(total, 1.1 * model);
  EXPECT_GE(total, 0.99 * model);
  EXPECT_EQ(SummaryField(summaries[0], "weights_fingerprint"),
            SummaryField(summaries[1], "weights_fingerprint"));
}

TEST_F(StartupBytesTest, OtherSeedPullsTheShardsWeightsAndEndsIdentical) {
  const pid_t first = StartWorker(0, 7);
  // Worker 1 starts once worker 0's values are on both shards, so that it
  // is the one whose values differ.
  const bool initialised = ShardsInitialised(absl::Seconds(60));
  const pid_t second = StartWorker(1, 8);
  const std::string summaries[2] = {Finish(0, first), Finish(1, second)};
  ASSERT_TRUE(initialised);
  ASSERT_FALSE(summaries[0].empty());
  ASSERT_FALSE(summaries[1].empty());
  const double model = ModelCopyBytes(summaries[0]);
  // Worker 0 sent the values; worker 1 sent none and pulled them all.
  EXPECT_GE(Number(summaries[0], "startup_sent_bytes"), 0.99 * model);
  EXPECT_LT(Number(summaries[0], "startup_received_bytes"), 0.01 * model);
  EXPECT_LT(Number(summaries[1], "startup_sent_bytes"), 0.01 * model);
  EXPECT_GE(Number(summaries[1], "startup_received_bytes"), 0.99 * model);
  EXPECT_EQ(SummaryField(summaries[0], "weights_fingerprint"),
            SummaryField(summaries[1], "weights_fingerprint"));
}

}  // namespace
}  // namespace gradwire::testing
