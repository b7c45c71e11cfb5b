// A shard SIGKILLed in the middle of real training and restarted on its
// checkpoint directory: the worker retries, training completes, and the
// final model is bit for bit the model of a run without the kill, so no
// acknowledged update was lost (the write-ahead log) and none was applied
// twice (exactly-once pushes).
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

constexpr int kShards = 2;
constexpr int kSteps = 240;
// Shard 0 is killed once it has applied this many updates (after its first
// periodic checkpoint, so the restart needs both checkpoint and log).
constexpr uint64_t kKillAfterUpdates = 50;

double JsonNumber(const std::string& json, const std::string& key) {
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(SummaryField(json, key), &value))
      << key << " in " << json;
  return value;
}

// Updates applied by the shard so far (the largest chunk version), or 0.
uint64_t MaxVersion(const ServerProcess& shard) {
  auto stub = shard.NewStub();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  v1::ShardInfo info;
  if (!stub->GetInfo(&context, v1::GetInfoRequest(), &info).ok()) return 0;
  return info.max_version();
}

// Whether `dir` holds a complete checkpoint (they are written under a
// temporary name and renamed to checkpoint-<sequence>.gwck).
bool HasCheckpoint(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "checkpoint-") &&
        absl::EndsWith(name, ".gwck")) {
      return true;
    }
  }
  return false;
}

class ShardKillTest : public ::testing::Test {
 protected:
  std::vector<std::string> ShardArgs(const std::string& run, int shard,
                                     int port) const {
    return {absl::StrCat("--shard-id=", shard),
            absl::StrCat("--num-shards=", kShards),
            "--num-workers=1",
            "--mode=bsp",
            absl::StrCat("--port=", port),
            absl::StrCat("--checkpoint-dir=", dir_.path(), "/", run, "-shard-",
                         shard),
            "--checkpoint-every=40"};
  }

  // Starts the shards of `run` on fresh ports.
  void StartShards(const std::string& run) {
    shards_.clear();
    ports_.clear();
    for (int i = 0; i < kShards; ++i) {
      ports_.push_back(PickFreeLoopbackPort());
      auto shard = ServerProcess::Start(ShardArgs(run, i, ports_[i]));
      ASSERT_TRUE(shard.ok()) << shard.status();
      shards_.push_back(*std::move(shard));
    }
  }

  std::vector<std::string> WorkerCommand(const std::string& summary) const {
    const char* worker = std::getenv("GRADWIRE_WORKER_BIN");
    std::string addresses;
    for (int i = 0; i < kShards; ++i) {
      absl::StrAppend(&addresses, i == 0 ? "" : ",", "127.0.0.1:", ports_[i]);
    }
    return {worker == nullptr ? "" : worker,
            "--shards=" + addresses,
            "--num-workers=1",
            "--model=mlp",
            "--epochs=2",
            absl::StrCat("--max-steps=", kSteps),
            "--train-limit=8000",
            "--test-limit=2000",
            "--progress=log",
            "--summary-json=" + summary};
  }

  // Runs the worker to its end; kills and restarts shard 0 on the way when
  // `kill` is set. Returns the worker's summary JSON.
  std::string Train(const std::string& run, bool kill) {
    StartShards(run);
    const std::string summary = absl::StrCat(dir_.path(), "/", run, ".json");
    absl::StatusOr<pid_t> worker =
        SpawnProcess(WorkerCommand(summary), dir_.path() + "/" + run + ".out",
                     dir_.path() + "/" + run + ".err");
    EXPECT_TRUE(worker.ok()) << worker.status();
    if (!worker.ok()) return "";
    if (kill) KillAndRestartShard0(run);
    absl::StatusOr<int> code = WaitForExit(*worker, absl::Seconds(120));
    if (!code.ok()) kill_worker(*worker);
    EXPECT_EQ(code.value_or(-1), 0)
        << ReadFileOrEmpty(dir_.path() + "/" + run + ".err");
    return ReadFileOrEmpty(summary);
  }

  void KillAndRestartShard0(const std::string& run) {
    // The checkpoint after update 40 is written beside the training; wait
    // for it on disk too, or a fast shard is killed before it lands.
    const std::string dir = absl::StrCat(dir_.path(), "/", run, "-shard-0");
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (
        (MaxVersion(*shards_[0]) < kKillAfterUpdates || !HasCheckpoint(dir)) &&
        absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_GE(MaxVersion(*shards_[0]), kKillAfterUpdates);
    ASSERT_TRUE(HasCheckpoint(dir)) << "no checkpoint in " << dir;
    shards_[0]->Signal(SIGKILL);
    ASSERT_EQ(shards_[0]->Wait(absl::Seconds(10)).value_or(-1), 128 + SIGKILL);
    // Down for a moment: the worker's calls fail and are retried.
    absl::SleepFor(absl::Milliseconds(300));
    auto restarted = ServerProcess::Start(ShardArgs(run, 0, ports_[0]));
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    shards_[0] = *std::move(restarted);
    restart_log_ = shards_[0]->Stderr();
  }

  static void kill_worker(pid_t pid) {
    kill(pid, SIGKILL);
    WaitForExit(pid, absl::Seconds(5)).IgnoreError();
  }

  TempDir dir_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<ServerProcess>> shards_;
  std::string restart_log_;
};

TEST_F(ShardKillTest, KilledShardLosesNoAcknowledgedUpdateAndAppliesNoneTwice) {
  const std::string reference = Train("reference", /*kill=*/false);
  const std::string killed = Train("killed", /*kill=*/true);
  ASSERT_FALSE(reference.empty());
  ASSERT_FALSE(killed.empty());
  // The restart used both the checkpoint and the log.
  EXPECT_NE(restart_log_.find("restored checkpoint sequence"),
            std::string::npos)
      << restart_log_;
  EXPECT_NE(restart_log_.find("replayed write-ahead log"), std::string::npos)
      << restart_log_;
  EXPECT_EQ(JsonNumber(killed, "steps"), kSteps);
  EXPECT_GT(JsonNumber(killed, "retries"), 0) << killed;
  EXPECT_EQ(JsonNumber(reference, "retries"), 0) << reference;
  // Same updates, each applied once, in the same order: the same model.
  EXPECT_EQ(SummaryField(killed, "weights_fingerprint"),
            SummaryField(reference, "weights_fingerprint"));
  EXPECT_EQ(SummaryField(killed, "test_accuracy"),
            SummaryField(reference, "test_accuracy"));
  EXPECT_GT(JsonNumber(killed, "test_accuracy"), 0.7) << killed;
  std::cout << "killed run: " << JsonNumber(killed, "steps") << " steps, "
            << JsonNumber(killed, "retries") << " retries, accuracy "
            << SummaryField(killed, "test_accuracy") << " (uninterrupted "
            << SummaryField(reference, "test_accuracy") << "), fingerprint "
            << SummaryField(killed, "weights_fingerprint") << "\n";
}

}  // namespace
}  // namespace gradwire::testing
