// The `gradwire` command-line tool as a user runs it: `gradwire local`
// starting real shards and workers, its failure and Ctrl-C paths (no process
// may be left behind), `gradwire health`, and its usage errors.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

std::string CliBinary() {
  const char* binary = std::getenv("GRADWIRE_CLI_BIN");
  return binary != nullptr ? binary : "";
}

// Runs `gradwire args...`; fails the test if it does not finish in time.
ExitedProcess RunCli(const std::vector<std::string>& args,
                     absl::Duration timeout = absl::Seconds(10)) {
  absl::StatusOr<ExitedProcess> exited = RunToExit(CliBinary(), args, timeout);
  EXPECT_TRUE(exited.ok()) << exited.status();
  return exited.ok() ? *exited : ExitedProcess{};
}

// Pids of the processes whose command line mentions `text` (the run
// directory appears in every shard's and worker's command line).
std::vector<std::string> ProcessesMentioning(const std::string& text) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == getpid()) continue;
    std::string cmdline =
        ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cmdline"));
    absl::StrReplaceAll({{std::string(1, '\0'), " "}}, &cmdline);
    if (cmdline.find(text) != std::string::npos) {
      found.push_back(absl::StrCat(pid, ": ", cmdline));
    }
  }
  closedir(proc);
  return found;
}

// SIGKILLs the processes whose command line mentions `text` (a run
// directory of this test): a failed test must not leave them behind.
void KillProcessesMentioning(const std::string& text) {
  for (const std::string& process : ProcessesMentioning(text)) {
    int pid = 0;
    if (absl::SimpleAtoi(process.substr(0, process.find(':')), &pid)) {
      kill(pid, SIGKILL);
    }
  }
}

// Writes `text` to `path` with mode `mode`.
void WriteFile(const std::string& path, const std::string& text, int mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

// A stand-in for a worker (--worker-command): writes its arguments, one a
// line, to $1/args-<worker id>, then a summary with the numbers that
// gradwire local requires to its --summary-json path, and exits 0.
constexpr char kFakeWorker[] = R"(#!/bin/bash
out_dir=$1
shift
for arg in "$@"; do
  case "$arg" in
    --worker-id=*) id=${arg#--worker-id=} ;;
    --summary-json=*) summary=${arg#--summary-json=} ;;
  esac
done
printf '%s\n' "$@" > "$out_dir/args-$id"
printf '{"worker_id": %s, "test_accuracy": 0.5, "steps": 3, "wall_seconds": 0.25, "pushed_bytes": 10, "pulled_bytes": 20, "dense_equivalent_bytes": 40}\n' "$id" > "$summary"
)";

class GradwireLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CliBinary().empty()) GTEST_SKIP() << "GRADWIRE_CLI_BIN is not set";
  }
  void TearDown() override { KillProcessesMentioning(dir_.path()); }
  TempDir dir_;
};

TEST_F(GradwireLocalTest, TinyRunSucceedsAndSumsUpTheCluster) {
  const std::string summary = dir_.path() + "/summary.json";
  // 2000 examples over 2 workers are 15 batches of 64: two epochs make room
  // for 20 steps.
  const ExitedProcess run = RunCli(
      {"local", "--shards=2", "--workers=2", "--model=mlp", "--max-steps=20",
       "--epochs=2", "--train-limit=2000", "--test-limit=500",
       "--summary-json=" + summary, "--log-dir=" + dir_.path() + "/run"},
      absl::Seconds(55));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("shard 1 serving on 127.0.0.1:"));
  EXPECT_THAT(run.out, HasSubstr("test accuracy"));
  const std::string json = ReadFileOrEmpty(summary);
  EXPECT_THAT(json, HasSubstr("\"steps\": 20,"));
  EXPECT_THAT(json, HasSubstr("\"workers\": 2,"));
  EXPECT_THAT(json, HasSubstr("\"shards\": 2,"));
  // The numbers, read the simple way: "key": value.
  const auto number = [&json](const std::string& key) {
    const size_t at = json.find("\"" + key + "\": ");
    double value = -1;
    if (at == std::string::npos) return value;
    const size_t start = at + key.size() + 4;
    const size_t end = json.find_first_of(",}", start);
    EXPECT_TRUE(absl::SimpleAtod(json.substr(start, end - start), &value))
        << key << " in " << json;
    return value;
  };
  EXPECT_GT(number("pushed_bytes"), 0) << json;
  EXPECT_GT(number("dense_equivalent_bytes"), number("pushed_bytes")) << json;
  EXPECT_GT(number("compression_ratio"), 1) << json;
  EXPECT_GT(number("test_accuracy"), 0.3) << json;
  // The workers' CPU account: 20 steps each, compute and communication
  // measured, and the report's line from it.
  EXPECT_EQ(number("cpu_steps"), 40) << json;
  EXPECT_GT(number("cpu_compute_seconds"), 0) << json;
  EXPECT_GT(number("cpu_communication_seconds"), 0) << json;
  EXPECT_THAT(json, HasSubstr("\"cpu_seconds_by_activity\": {\"compress\":"));
  EXPECT_THAT(json, HasSubstr(",\"rpc\":"));
  EXPECT_THAT(run.out, HasSubstr("worker CPU     communication "));
  EXPECT_THAT(run.out, HasSubstr("by activity, ms/step: "));
  EXPECT_THAT(ProcessesMentioning(dir_.path()), ::testing::IsEmpty());
}

TEST_F(GradwireLocalTest, FailingWorkerStopsEverythingAndExitsNonZero) {
  const std::string run_dir = dir_.path() + "/run";
  const ExitedProcess run = RunCli(
      {"local", "--shards=2", "--workers=2", "--model=mlp",
       "--data-dir=/nonexistent", "--log-dir=" + run_dir, "--grace-seconds=5"},
      absl::Seconds(55));
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("worker"));
  EXPECT_THAT(run.err, HasSubstr("/nonexistent"));
  EXPECT_THAT(ProcessesMentioning(run_dir), ::testing::IsEmpty());
}

TEST_F(GradwireLocalTest, CtrlCStopsEveryProcess) {
  const std::string run_dir = dir_.path() + "/run";
  const std::string out = dir_.path() + "/out", err = dir_.path() + "/err";
  absl::StatusOr<pid_t> pid =
      SpawnProcess({CliBinary(), "local", "--shards=2", "--workers=2",
                    "--model=mlp", "--epochs=1000", "--log-dir=" + run_dir},
                   out, err);
  ASSERT_TRUE(pid.ok()) << pid.status();
  // Wait until the workers run (both started), then press Ctrl-C.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ProcessesMentioning(run_dir + "/worker-1.json").empty() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Seconds(1));
  kill(*pid, SIGINT);
  absl::StatusOr<int> code = WaitForExit(*pid, absl::Seconds(30));
  if (!code.ok()) kill(*pid, SIGKILL);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGINT) << ReadFileOrEmpty(err);
  EXPECT_THAT(ProcessesMentioning(run_dir), ::testing::IsEmpty());
}

// A `gradwire local` killed with SIGKILL cannot stop its children; their
// PR_SET_PDEATHSIG must.
TEST_F(GradwireLocalTest, KilledCliLeavesNoProcessBehind) {
  const std::string run_dir = dir_.path() + "/run";
  absl::StatusOr<pid_t> pid =
      SpawnProcess({CliBinary(), "local", "--shards=2", "--workers=2",
                    "--model=mlp", "--epochs=1000", "--log-dir=" + run_dir},
                   dir_.path() + "/out", dir_.path() + "/err");
  ASSERT_TRUE(pid.ok()) << pid.status();
  // Wait until 2 shards and 2 workers run their own programs. Counting
  // the processes that mention the run is not enough: a child between
  // fork and exec still shows gradwire's own command line, and none while
  // it execs.
  const auto all_up = [&run_dir] {
    int shards = 0;
    int workers = 0;
    for (const std::string& process : ProcessesMentioning(run_dir)) {
      if (absl::StrContains(process, "/gradwire-server ")) ++shards;
      if (absl::StrContains(process, "/gradwire-worker ")) ++workers;
    }
    return shards == 2 && workers == 2;
  };
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!all_up() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(all_up()) << ReadFileOrEmpty(dir_.path() + "/err");
  kill(*pid, SIGKILL);
  ASSERT_TRUE(WaitForExit(*pid, absl::Seconds(10)).ok());
  // The shards take SIGTERM as a graceful stop: give them their grace.
  deadline = absl::Now() + absl::Seconds(20);
  while (!ProcessesMentioning(run_dir).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(ProcessesMentioning(run_dir), ::testing::IsEmpty());
}

TEST_F(GradwireLocalTest, BadWorkerFlagIsAUsageError) {
  const ExitedProcess run =
      RunCli({"local", "--shards=1", "--workers=1", "--compressor=nope",
              "--log-dir=" + dir_.path() + "/run"},
             absl::Seconds(30));
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("--compressor"));
}

// The shards' optimizer "mean" hands back gradients, not weights: a
// training worker that takes its weights from the shards refuses it.
TEST_F(GradwireLocalTest, OptimizerMeanIsRefusedByTheTrainingWorker) {
  const ExitedProcess run =
      RunCli({"local", "--shards=1", "--workers=1", "--optimizer=mean",
              "--log-dir=" + dir_.path() + "/run"},
             absl::Seconds(30));
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("--optimizer: 'mean'"));
}

TEST_F(GradwireLocalTest, WorkerCommandGetsEveryWorkerFlag) {
  const std::string script = dir_.path() + "/fake-worker.sh";
  WriteFile(script, kFakeWorker, 0755);
  const std::string summary = dir_.path() + "/summary.json";
  const std::string run_dir = dir_.path() + "/run";
  // The command's own words come first, its flags after them: here the
  // script's output directory.
  const ExitedProcess run =
      RunCli({"local", "--shards=1", "--workers=2",
              "--worker-command=" + script + "  " + dir_.path(), "--model=mlp",
              "--max-steps=7", "--summary-json=" + summary,
              "--log-dir=" + run_dir, "--", "--custom-flag=x"},
             absl::Seconds(55));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (int id : {0, 1}) {
    const std::string recorded =
        ReadFileOrEmpty(absl::StrCat(dir_.path(), "/args-", id));
    const std::vector<std::string> args =
        absl::StrSplit(recorded, '\n', absl::SkipEmpty());
    EXPECT_THAT(args, ::testing::Contains(absl::StrCat("--worker-id=", id)))
        << recorded;
    EXPECT_THAT(args, ::testing::Contains("--num-workers=2")) << recorded;
    EXPECT_THAT(
        args, ::testing::Contains(::testing::StartsWith("--shards=127.0.0.1:")))
        << recorded;
    EXPECT_THAT(args, ::testing::Contains(absl::StrCat(
                          "--summary-json=", run_dir, "/worker-", id, ".json")))
        << recorded;
    // The user's worker flags come last, in order.
    EXPECT_THAT(recorded, ::testing::EndsWith(
                              "--model=mlp\n--max-steps=7\n--custom-flag=x\n"));
    EXPECT_THAT(args, ::testing::Not(::testing::Contains(
                          ::testing::HasSubstr("--worker-command"))));
  }
  EXPECT_THAT(ReadFileOrEmpty(dir_.path() + "/args-1"),
              HasSubstr("--evaluate=false\n"));
  const std::string json = ReadFileOrEmpty(summary);
  EXPECT_EQ(SummaryField(json, "workers"), "2") << json;
  EXPECT_EQ(SummaryField(json, "pushed_bytes"), "20") << json;
  EXPECT_EQ(SummaryField(json, "steps"), "3") << json;
  EXPECT_THAT(ProcessesMentioning(run_dir), ::testing::IsEmpty());
}

// The first word of --worker-command is looked up in PATH, as execvp does.
TEST_F(GradwireLocalTest, WorkerCommandIsFoundInPath) {
  const std::string script = dir_.path() + "/fake-worker.sh";
  WriteFile(script, kFakeWorker, 0644);  // Run by bash: needs no x bit.
  const ExitedProcess run =
      RunCli({"local", "--shards=1", "--workers=1",
              absl::StrCat("--worker-command=bash ", script, " ", dir_.path()),
              "--log-dir=" + dir_.path() + "/run"},
             absl::Seconds(55));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(ReadFileOrEmpty(dir_.path() + "/args-0"),
              HasSubstr("--worker-id=0\n"));
}

// A worker command that cannot run is a usage error found before any
// process starts (the run directory is not even created).
TEST_F(GradwireLocalTest, BadWorkerCommandIsAUsageError) {
  const std::string not_executable = dir_.path() + "/not-executable.sh";
  WriteFile(not_executable, kFakeWorker, 0644);
  for (const std::string& command :
       {std::string("gradwire-no-such-program --x"),
        dir_.path() + "/no-such-file", not_executable, dir_.path(),
        std::string("   "), std::string("")}) {
    const std::string run_dir = dir_.path() + "/run";
    const ExitedProcess run =
        RunCli({"local", "--shards=1", "--workers=1",
                "--worker-command=" + command, "--log-dir=" + run_dir});
    EXPECT_EQ(run.exit_code, 2) << command << ": " << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr("--worker-command")) << command;
    EXPECT_THAT(run.out, ::testing::Not(HasSubstr("serving"))) << command;
    EXPECT_FALSE(std::filesystem::exists(run_dir)) << command;
  }
}

TEST_F(GradwireLocalTest, HealthOfALiveShardIsServing) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> shard =
      ServerProcess::Start({});
  ASSERT_TRUE(shard.ok()) << shard.status();
  const ExitedProcess health =
      RunCli({"health", "--addr=" + (*shard)->target()});
  EXPECT_EQ(health.exit_code, 0) << health.out << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST_F(GradwireLocalTest, HealthOfADeadPortFails) {
  const ExitedProcess health = RunCli(
      {"health", absl::StrCat("--addr=127.0.0.1:", PickFreeLoopbackPort()),
       "--timeout-seconds=3"});
  EXPECT_EQ(health.exit_code, 1) << health.out << health.err;
  EXPECT_THAT(health.out, HasSubstr("UNAVAILABLE"));
}

TEST_F(GradwireLocalTest, HelpAndUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"},
        {"local", "--help"},
        {"health", "--help"}}) {
    const ExitedProcess help = RunCli(args);
    EXPECT_EQ(help.exit_code, 0) << absl::StrJoin(args, " ") << help.err;
    EXPECT_THAT(help.out, HasSubstr("gradwire")) << absl::StrJoin(args, " ");
  }
  EXPECT_THAT(RunCli({"local", "--help"}).out, HasSubstr("--workers"));
  EXPECT_THAT(RunCli({"local", "--help"}).out, HasSubstr("--worker-command"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{},
        {"frobnicate"},
        {"local", "--shards=0"},
        {"local", "--workers=x"},
        {"local", "--worker-id=1"},
        {"local", "--shards"},
        {"local", "--local-size=2"},
        {"health"},
        {"health", "--addr=a:1", "--nope"},
        {"health", "--addr=a:1", "--timeout-seconds=0"}}) {
    const ExitedProcess bad = RunCli(args);
    EXPECT_EQ(bad.exit_code, 2) << absl::StrJoin(args, " ") << bad.err;
    EXPECT_FALSE(bad.err.empty()) << absl::StrJoin(args, " ");
  }
}

}  // namespace
}  // namespace gradwire::testing
