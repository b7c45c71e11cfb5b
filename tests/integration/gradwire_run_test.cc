// `gradwire run` as a user runs it: real shards (started by it, or by the
// test and joined), worker commands of the test's own (/bin/sh scripts, no
// Python), the environment contract (TLS included), rank-prefixed output,
// exit codes, usage errors and Ctrl-C. No process may be left behind.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
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
#include "tests/integration/dev_certs.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

std::string CliBinary() {
  const char* binary = std::getenv("GRADWIRE_CLI_BIN");
  return binary != nullptr ? binary : "";
}

// Runs `gradwire args...`; fails the test if it does not finish in time.
ExitedProcess RunCli(const std::vector<std::string>& args,
                     absl::Duration timeout = absl::Seconds(30)) {
  absl::StatusOr<ExitedProcess> exited = RunToExit(CliBinary(), args, timeout);
  EXPECT_TRUE(exited.ok()) << exited.status();
  return exited.ok() ? *exited : ExitedProcess{};
}

// Pids and command lines of the processes whose command line mentions
// `text`. Every shard's names the run directory; every worker of these
// tests gets the test's directory as an argument.
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
    if (absl::StrContains(cmdline, text)) {
      found.push_back(absl::StrCat(pid, ": ", cmdline));
    }
  }
  closedir(proc);
  return found;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// Prints what a worker learns from its environment and its argv, one fact
// a line, a line on stderr, and a last line without '\n'. Run as
// `sh -c SCRIPT MARKER ARGS...`: $0 is the marker (the test's directory).
constexpr char kReportingWorker[] = R"sh(
echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE"
echo "shards=$GRADWIRE_SHARDS"
echo "run_dir=$GRADWIRE_RUN_DIR summary=$GRADWIRE_SUMMARY_JSON"
echo "tls=${GRADWIRE_TLS_CA-unset} token=${GRADWIRE_AUTH_TOKEN_FILE-unset}"
for arg in "$@"; do echo "arg=$arg"; done
echo "argv=$(tr '\0' ' ' < /proc/$$/cmdline)"
if [ "$RANK" = 0 ]; then "$GRADWIRE_CLI_BIN" health --addr="${GRADWIRE_SHARDS##*,}"; fi
echo "rank $RANK on stderr" >&2
printf 'last words of %s' "$RANK"
)sh";

class GradwireRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CliBinary().empty()) GTEST_SKIP() << "GRADWIRE_CLI_BIN is not set";
    run_dir_ = dir_.path() + "/run";
  }
  void TearDown() override {
    for (const std::string& process : ProcessesMentioning(dir_.path())) {
      int pid = 0;
      if (absl::SimpleAtoi(process.substr(0, process.find(':')), &pid)) {
        kill(pid, SIGKILL);
      }
    }
  }
  // `gradwire run OPTIONS --run-dir=<run dir> -- sh -c SCRIPT <test dir>
  // ARGS...`.
  ExitedProcess Run(std::vector<std::string> options, const std::string& script,
                    const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"run"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--run-dir=" + run_dir_, "--", "sh", "-c", script,
                             dir_.path()});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCli(argv, absl::Seconds(60));
  }

  TempDir dir_;
  std::string run_dir_;
};

TEST_F(GradwireRunTest, WorkersGetTheEnvironmentAndTheirArgvUntouched) {
  // An outer job's TLS setting must not reach workers of a plaintext run.
  setenv("GRADWIRE_TLS_CA", "/outer/ca.pem", 1);
  const ExitedProcess run = Run({"-n", "2", "--shards=2"}, kReportingWorker,
                                {"two words", "--flag=x", "--help"});
  unsetenv("GRADWIRE_TLS_CA");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // Every line of the workers' stdout is theirs, behind their rank.
  EXPECT_THAT(
      Lines(run.out),
      Each(AllOf(::testing::AnyOf(StartsWith("[0] "), StartsWith("[1] ")))))
      << run.out;
  for (int rank : {0, 1}) {
    const std::string p = absl::StrCat("[", rank, "] ");
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat(p, "rank=", rank,
                                                " world=2 local=0/1\n")));
    EXPECT_THAT(run.out, HasSubstr(p + "shards=127.0.0.1:"));
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat(p, "run_dir=", run_dir_,
                                                " summary=", run_dir_,
                                                "/worker-", rank, ".json\n")));
    EXPECT_THAT(run.out, HasSubstr(p + "tls=unset token=unset\n"));
    // argv exactly as given: nothing appended, argv[0] as written. (The
    // two ranks' lines may alternate: each is checked alone.)
    for (const char* arg : {"two words", "--flag=x", "--help"}) {
      EXPECT_THAT(run.out, HasSubstr(absl::StrCat(p, "arg=", arg, "\n")));
    }
    EXPECT_THAT(run.out, HasSubstr(p + "argv=sh -c "));
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat(
                             dir_.path(), " two words --flag=x --help \n")));
    EXPECT_THAT(run.err,
                HasSubstr(absl::StrCat(p, "rank ", rank, " on stderr\n")));
    EXPECT_THAT(run.out,
                HasSubstr(absl::StrCat(p, "last words of ", rank, "\n")));
    EXPECT_THAT(
        ReadFileOrEmpty(absl::StrCat(run_dir_, "/worker-", rank, ".log")),
        AllOf(HasSubstr(absl::StrCat("rank=", rank, " world=2")),
              HasSubstr(absl::StrCat("rank ", rank, " on stderr"))));
  }
  // Two shards, comma-separated; the last one serves while workers run.
  const size_t at = run.out.find("[0] shards=");
  const std::string shards =
      run.out.substr(at + 11, run.out.find('\n', at) - at - 11);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(shards, ',')).size(), 2u)
      << shards;
  EXPECT_THAT(run.out, HasSubstr("[0] SERVING\n"));
  // No worker summary: the shards' counters sum the run up.
  EXPECT_THAT(run.err, HasSubstr("from the shards' metrics"));
  EXPECT_THAT(ProcessesMentioning(dir_.path()), IsEmpty());
}

TEST_F(GradwireRunTest, TheFirstFailingWorkersCodeIsTheRunsAndStopsTheRest) {
  const absl::Time start = absl::Now();
  const ExitedProcess run =
      Run({"-n", "2", "--grace-seconds=5"},
          "if [ \"$RANK\" = 1 ]; then echo failing; exit 3; fi; exec sleep 60");
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("[1] failing\n"));
  EXPECT_THAT(run.err, HasSubstr("worker 1 exited with code 3"));
  EXPECT_THAT(run.err, HasSubstr("logs kept in " + run_dir_));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_THAT(ProcessesMentioning(dir_.path()), IsEmpty());
}

TEST_F(GradwireRunTest, WorkerSummariesGiveTheReportOfLocal) {
  const ExitedProcess run = Run(
      {"-n", "2"},
      "printf '{\"test_accuracy\": 0.75, \"steps\": 3, \"wall_seconds\": 1, "
      "\"pushed_bytes\": 1000, \"pulled_bytes\": 2000, "
      "\"dense_equivalent_bytes\": 8000}\\n' > \"$GRADWIRE_SUMMARY_JSON\"");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("gradwire run: 2 workers, 1 shards, 3 steps"));
  EXPECT_THAT(run.err, HasSubstr("test accuracy  0.7500"));
  EXPECT_THAT(run.err, HasSubstr("pushed         2.0 kB (dense fp32 would be "
                                 "16.0 kB, 8.0x less)"));
}

TEST_F(GradwireRunTest, JoinsShardsStartedElsewhere) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> a = ServerProcess::Start({});
  absl::StatusOr<std::unique_ptr<ServerProcess>> b = ServerProcess::Start({});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string addresses =
      absl::StrCat((*a)->target(), ",", (*b)->target());
  const ExitedProcess run = Run({"-n", "1", "--shard-addresses=" + addresses},
                                "echo \"shards=$GRADWIRE_SHARDS\"");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, "[0] shards=" + addresses + "\n");
  EXPECT_THAT(run.err, HasSubstr("no summary"));
  // Joined shards are not the run's to stop.
  EXPECT_EQ(kill((*a)->pid(), 0), 0);
  EXPECT_EQ(kill((*b)->pid(), 0), 0);

  const ExitedProcess dead = Run(
      {"-n", "1", "--start-timeout-seconds=1",
       absl::StrCat("--shard-addresses=127.0.0.1:", PickFreeLoopbackPort())},
      "echo never");
  EXPECT_EQ(dead.exit_code, 1) << dead.out << dead.err;
  EXPECT_THAT(dead.err, HasSubstr("did not serve within"));
  EXPECT_THAT(dead.out, Not(HasSubstr("never")));
}

TEST_F(GradwireRunTest, CtrlCGoesToTheWorkersAndStopsEverything) {
  const std::string out = dir_.path() + "/out", err = dir_.path() + "/err";
  absl::StatusOr<pid_t> pid = SpawnProcess(
      {CliBinary(), "run", "-n", "2", "--run-dir=" + run_dir_, "--", "sh", "-c",
       "trap 'echo got INT; exit 5' INT; echo ready; "
       "while :; do sleep 0.1; done",
       dir_.path()},
      out, err);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const auto ready = [&out] {
    const std::string text = ReadFileOrEmpty(out);
    return absl::StrContains(text, "[0] ready") &&
           absl::StrContains(text, "[1] ready");
  };
  while (!ready() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(ready()) << ReadFileOrEmpty(err);
  kill(*pid, SIGINT);
  absl::StatusOr<int> code = WaitForExit(*pid, absl::Seconds(30));
  if (!code.ok()) kill(*pid, SIGKILL);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGINT) << ReadFileOrEmpty(err);
  EXPECT_THAT(ReadFileOrEmpty(out), HasSubstr("[1] got INT\n"));
  EXPECT_THAT(ReadFileOrEmpty(err), HasSubstr("received SIGINT"));
  EXPECT_THAT(ProcessesMentioning(dir_.path()), IsEmpty());
}

// The TLS variables of the contract are all a client needs: `gradwire
// health` reads its --tls-* flags from them. The token is the worker's own
// (the directory holds per-worker tokens).
TEST_F(GradwireRunTest, MutualTlsReachesTheWorkersThroughTheEnvironment) {
  absl::StatusOr<std::unique_ptr<DevCerts>> certs = DevCerts::Make();
  ASSERT_TRUE(certs.ok()) << certs.status();
  const ExitedProcess run =
      Run({"-n", "1", "--tls-dir=" + (*certs)->dir()},
          "echo \"ca=$GRADWIRE_TLS_CA cert=$GRADWIRE_TLS_CERT "
          "key=$GRADWIRE_TLS_KEY token=$GRADWIRE_AUTH_TOKEN_FILE\"; "
          "\"$GRADWIRE_CLI_BIN\" health --addr=\"$GRADWIRE_SHARDS\"; "
          "env -u GRADWIRE_TLS_CA -u GRADWIRE_TLS_CERT -u GRADWIRE_TLS_KEY "
          "\"$GRADWIRE_CLI_BIN\" health --addr=\"$GRADWIRE_SHARDS\" "
          "--timeout-seconds=2 >/dev/null || echo plaintext refused");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, absl::StrCat("[0] ca=", (*certs)->ca(),
                                  " cert=", (*certs)->client_cert(),
                                  " key=", (*certs)->client_key(),
                                  " token=", (*certs)->dir(), "/worker-token-0",
                                  "\n[0] SERVING\n[0] plaintext refused\n"));
}

TEST_F(GradwireRunTest, BadCommandLinesExit2NamingTheOption) {
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"run", "-n", "2"}, "missing --"},
      {{"run", "-n", "2", "true"}, "'true' comes before --"},
      {{"run", "-n", "2", "--"}, "no worker command"},
      {{"run", "--", "true"}, "-n WORKERS is required"},
      {{"run", "-n", "0", "--", "true"}, "-n: 0"},
      {{"run", "-n=300", "--", "true"}, "-n: 300"},
      {{"run", "-n", "x", "--", "true"}, "x"},
      {{"run", "-n", "1", "--shards=2", "--shard-addresses=127.0.0.1:7000",
        "--", "true"},
       "--shards and --shard-addresses"},
      {{"run", "-n", "1", "--shard-addresses=127.0.0.1", "--", "true"},
       "--shard-addresses: '127.0.0.1' is not HOST:PORT"},
      {{"run", "-n", "1", "--tls-ca=/x.pem", "--", "true"}, "--tls-ca"},
      {{"run", "-n", "1", "--dashboard-port=9090", "--", "true"},
       "--dashboard-port needs --dashboard"},
      {{"run", "-n", "1", "--dashboard", "--dashboard-linger-seconds=-5", "--",
        "true"},
       "--dashboard-linger-seconds: -5 is outside [0, 86400]"},
      {{"run", "-n", "1", "--dashboard", "--dashboard-port=70000", "--",
        "true"},
       "--dashboard-port: 70000 is outside [0, 65535]"},
      {{"run", "-n", "1", "--dashboard", "--prometheus=/no/such/prometheus",
        "--", "true"},
       "--dashboard needs Prometheus"},
      {{"run", "-n", "1", "--epochs=3", "--", "true"}, "--epochs"},
      {{"run", "-n", "1", "--", "gradwire-no-such-program"}, "worker command"},
  };
  for (const auto& c : cases) {
    const ExitedProcess bad = RunCli(c.args);
    const std::string line = absl::StrJoin(c.args, " ");
    EXPECT_EQ(bad.exit_code, 2) << line << ": " << bad.err;
    EXPECT_THAT(bad.err, HasSubstr(c.message)) << line;
    EXPECT_THAT(bad.err, HasSubstr("gradwire run")) << line;
  }
  // A value that is not a number is Abseil's to refuse, by the flag's name.
  const ExitedProcess not_seconds =
      RunCli({"run", "-n", "1", "--dashboard", "--dashboard-linger-seconds",
              "soon", "--", "true"});
  EXPECT_EQ(not_seconds.exit_code, 2) << not_seconds.err;
  EXPECT_THAT(not_seconds.err, HasSubstr("'soon'"));
  EXPECT_THAT(not_seconds.err, HasSubstr("dashboard_linger_seconds"));
}

TEST_F(GradwireRunTest, HelpDescribesTheCommandAndItsEnvironment) {
  const ExitedProcess help = RunCli({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* text :
       {"-n N", "--shard-addresses", "GRADWIRE_SHARDS", "RANK=i", "WORLD_SIZE",
        "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GRADWIRE_SUMMARY_JSON",
        "GRADWIRE_TLS_CA", "GRADWIRE_RUN_DIR", "[0] ", "Exit code",
        "--dashboard-linger-seconds", "GRADWIRE_METRICS_LINGER_SECONDS"}) {
    EXPECT_THAT(help.out, HasSubstr(text));
  }
  EXPECT_THAT(RunCli({"--help"}).out, HasSubstr("gradwire run -n W"));
}

}  // namespace
}  // namespace gradwire::testing
