// Workers as real processes against real shards: the custom-training-loop
// example (the README's library example), two local ranks of one node
// reducing through c10d Gloo, and reproducibility of whole runs.
#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

double JsonNumber(const std::string& json, const std::string& key) {
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(SummaryField(json, key), &value))
      << key << " in " << json;
  return value;
}

// The number after the last "accuracy " in `out`.
double PrintedAccuracy(const std::string& out) {
  const size_t at = out.rfind("accuracy ");
  double value = -1;
  if (at != std::string::npos) {
    if (!absl::SimpleAtod(out.substr(at + 9, out.find('\n', at) - at - 9),
                          &value)) {
      return -1;
    }
  }
  return value;
}

// Spawns every command, then reaps them all within `timeout` each.
std::vector<ExitedProcess> RunTogether(
    const std::vector<std::vector<std::string>>& commands,
    const std::string& dir, absl::Duration timeout) {
  std::vector<pid_t> pids;
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StatusOr<pid_t> pid =
        SpawnProcess(commands[i], absl::StrCat(dir, "/out-", i),
                     absl::StrCat(dir, "/err-", i));
    EXPECT_TRUE(pid.ok()) << pid.status();
    pids.push_back(pid.ok() ? *pid : -1);
  }
  std::vector<ExitedProcess> exited(commands.size());
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] < 0) continue;
    absl::StatusOr<int> code = WaitForExit(pids[i], timeout);
    if (!code.ok()) {
      kill(pids[i], SIGKILL);
      code = WaitForExit(pids[i], absl::Seconds(5));
      ADD_FAILURE() << "process " << i << " did not finish in time";
    }
    exited[i].exit_code = code.ok() ? *code : -1;
    exited[i].out = ReadFileOrEmpty(absl::StrCat(dir, "/out-", i));
    exited[i].err = ReadFileOrEmpty(absl::StrCat(dir, "/err-", i));
  }
  return exited;
}

class WorkerProcessesTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(WorkerProcessesTest, CustomLoopExampleTrainsTwoWorkersOnTwoShards) {
  const std::string example = EnvOrEmpty("GRADWIRE_EXAMPLE_BIN");
  ASSERT_FALSE(example.empty()) << "GRADWIRE_EXAMPLE_BIN is not set";
  std::vector<std::unique_ptr<ServerProcess>> shards;
  std::string addresses;
  for (int i = 0; i < 2; ++i) {
    auto shard = ServerProcess::Start(
        {absl::StrCat("--shard-id=", i), "--num-shards=2", "--num-workers=2"});
    ASSERT_TRUE(shard.ok()) << shard.status();
    addresses += (i == 0 ? "" : ",") + (*shard)->target();
    shards.push_back(std::move(*shard));
  }
  std::vector<std::vector<std::string>> commands;
  for (int w = 0; w < 2; ++w) {
    commands.push_back({example, "--shards=" + addresses,
                        absl::StrCat("--worker_id=", w), "--num_workers=2",
                        "--steps=150"});
  }
  const std::vector<ExitedProcess> runs =
      RunTogether(commands, dir_.path(), absl::Seconds(90));
  for (const ExitedProcess& run : runs) {
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("pushed "));
    // Chance is 0.25; the task is easy for the model.
    EXPECT_GT(PrintedAccuracy(run.out), 0.7) << run.out;
  }
  // BSP with the same weights pulled by both: the same model at the end.
  EXPECT_EQ(PrintedAccuracy(runs[0].out), PrintedAccuracy(runs[1].out));
}

TEST_F(WorkerProcessesTest, TwoLocalRanksReduceWithGlooAndEndIdentical) {
  const std::string worker = EnvOrEmpty("GRADWIRE_WORKER_BIN");
  ASSERT_FALSE(worker.empty()) << "GRADWIRE_WORKER_BIN is not set";
  auto shard = ServerProcess::Start({"--num-workers=1"});
  ASSERT_TRUE(shard.ok()) << shard.status();
  const int store_port = PickFreeLoopbackPort();
  ASSERT_GT(store_port, 0);
  std::vector<std::vector<std::string>> commands;
  for (int rank = 0; rank < 2; ++rank) {
    commands.push_back({worker, "--shards=" + (*shard)->target(),
                        "--worker-id=0", "--num-workers=1", "--local-size=2",
                        absl::StrCat("--local-rank=", rank),
                        absl::StrCat("--local-store=127.0.0.1:", store_port),
                        "--model=mlp", "--max-steps=25", "--train-limit=4000",
                        "--test-limit=1000", "--progress=log",
                        absl::StrCat("--summary-json=", dir_.path(), "/rank-",
                                     rank, ".json")});
  }
  const std::vector<ExitedProcess> runs =
      RunTogether(commands, dir_.path(), absl::Seconds(90));
  std::vector<std::string> summaries;
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(runs[rank].exit_code, 0)
        << "rank " << rank << ": " << runs[rank].out << runs[rank].err;
    summaries.push_back(
        ReadFileOrEmpty(absl::StrCat(dir_.path(), "/rank-", rank, ".json")));
  }
  const std::string fingerprint =
      SummaryField(summaries[0], "weights_fingerprint");
  EXPECT_EQ(fingerprint.size(), 16u) << summaries[0];
  EXPECT_EQ(SummaryField(summaries[1], "weights_fingerprint"), fingerprint);
  EXPECT_EQ(JsonNumber(summaries[0], "steps"), 25);
  EXPECT_EQ(JsonNumber(summaries[1], "steps"), 25);
  EXPECT_GT(JsonNumber(summaries[0], "test_accuracy"), 0.3) << summaries[0];
  EXPECT_EQ(JsonNumber(summaries[0], "test_accuracy"),
            JsonNumber(summaries[1], "test_accuracy"));
  // Each rank pushes only the chunks it owns; together they push every
  // chunk once per step, as one worker would.
  EXPECT_GT(JsonNumber(summaries[0], "pushed_bytes"), 0);
  EXPECT_GT(JsonNumber(summaries[0], "reduce_seconds"), 0);
}

class ReproducibilityTest : public ::testing::Test {
 protected:
  // One `gradwire local` run with `seed`; its cluster summary.
  std::string RunCluster(int seed, const std::string& name) {
    const std::string cli = EnvOrEmpty("GRADWIRE_CLI_BIN");
    EXPECT_FALSE(cli.empty()) << "GRADWIRE_CLI_BIN is not set";
    const std::string summary = absl::StrCat(dir_.path(), "/", name, ".json");
    absl::StatusOr<ExitedProcess> run =
        RunToExit(cli,
                  {"local", "--shards=2", "--workers=2", "--model=mlp",
                   "--max-steps=30", "--train-limit=4000", "--test-limit=1000",
                   "--compressor=topk", "--ratio=0.01",
                   absl::StrCat("--seed=", seed), "--summary-json=" + summary},
                  absl::Seconds(60));
    EXPECT_TRUE(run.ok()) << run.status();
    if (run.ok()) {
      EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
    }
    return ReadFileOrEmpty(summary);
  }
  TempDir dir_;
};

TEST_F(ReproducibilityTest, SameSeedSameRunOtherSeedOtherRun) {
  const std::string first = RunCluster(1, "first");
  const std::string again = RunCluster(1, "again");
  const std::string other = RunCluster(2, "other");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(again.empty());
  ASSERT_FALSE(other.empty());
  // Not pushed_bytes or pulled_bytes: with overlap and pull ahead (the
  // defaults) how a step's chunks batch into requests, and so their header
  // bytes, depends on timing; the compressed values and the weights do not.
  for (const char* key :
       {"weights_fingerprint", "test_accuracy", "final_loss"}) {
    EXPECT_EQ(SummaryField(first, key), SummaryField(again, key)) << key;
  }
  EXPECT_NE(SummaryField(first, "weights_fingerprint"),
            SummaryField(other, "weights_fingerprint"));
}

}  // namespace
}  // namespace gradwire::testing
