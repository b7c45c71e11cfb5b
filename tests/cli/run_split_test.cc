// gradwire run's command line split into its own options, the names given
// and the worker command, and the command lines it refuses with a usage
// error (exit code 2) before any option is parsed.
#include "cli/run_split.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::ExitedWithCode;
using ::testing::IsEmpty;

TEST(RunSplitTest, OwnOptionsBeforeDashesAndTheCommandAfter) {
  const RunArgumentSplit split =
      SplitRunArguments({"-n", "2", "--shards=3", "--run-dir", "/tmp/r", "--",
                         "python", "train.py", "--lr", "0.1", "-n", "5", "--"});
  EXPECT_THAT(split.own,
              ElementsAre("--workers=2", "--shards=3", "--run-dir=/tmp/r"));
  EXPECT_THAT(split.given, ElementsAre("run_dir", "shards", "workers"));
  EXPECT_THAT(split.command, ElementsAre("python", "train.py", "--lr", "0.1",
                                         "-n", "5", "--"));
}

TEST(RunSplitTest, EverySpellingOfTheWorkersIsWorkers) {
  for (const std::vector<std::string>& workers :
       std::vector<std::vector<std::string>>{{"-n", "4"},
                                             {"-n=4"},
                                             {"--workers", "4"},
                                             {"--nproc-per-node", "4"},
                                             {"--nproc-per-node=4"},
                                             {"--nproc_per_node", "4"},
                                             {"--nproc_per_node=4"}}) {
    std::vector<std::string> args = workers;
    args.insert(args.end(), {"--", "cmd"});
    const RunArgumentSplit split = SplitRunArguments(args);
    EXPECT_THAT(split.own, ElementsAre("--workers=4")) << workers[0];
    EXPECT_THAT(split.given, ElementsAre("workers")) << workers[0];
  }
}

TEST(RunSplitTest, UnderscoresAndDashesAlike) {
  const RunArgumentSplit split = SplitRunArguments(
      {"-n", "1", "--master_addr", "10.0.0.1", "--node-rank=1", "--", "x"});
  EXPECT_THAT(split.own, ElementsAre("--workers=1", "--master_addr=10.0.0.1",
                                     "--node-rank=1"));
  EXPECT_THAT(split.given, ElementsAre("master_addr", "node_rank", "workers"));
}

// A boolean takes no value from the next argument: that one is read on
// its own, here as the option -n.
TEST(RunSplitTest, BooleansTakeAValueOnlyAfterEquals) {
  const RunArgumentSplit split =
      SplitRunArguments({"--keep-logs", "-n", "1", "--nokeep_logs",
                         "--allow-insecure-token=false", "--", "x"});
  EXPECT_THAT(split.own,
              ElementsAre("--keep-logs", "--workers=1", "--nokeep_logs",
                          "--allow-insecure-token=false"));
  EXPECT_THAT(split.given,
              ElementsAre("allow_insecure_token", "keep_logs", "workers"));
}

// The dashboard's options are gradwire local's, spelled alike; --dashboard
// is a boolean.
TEST(RunSplitTest, TheDashboardsOptionsAreOwn) {
  const RunArgumentSplit split = SplitRunArguments(
      {"--dashboard", "-n", "2", "--dashboard-port", "9090",
       "--dashboard_linger_seconds=5", "--prometheus", "/opt/prometheus",
       "--dashboard-consoles=/c", "--", "x", "--dashboard"});
  EXPECT_THAT(
      split.own,
      ElementsAre("--dashboard", "--workers=2", "--dashboard-port=9090",
                  "--dashboard_linger_seconds=5",
                  "--prometheus=/opt/prometheus", "--dashboard-consoles=/c"));
  EXPECT_THAT(
      split.given,
      ElementsAre("dashboard", "dashboard_consoles", "dashboard_linger_seconds",
                  "dashboard_port", "prometheus", "workers"));
  EXPECT_THAT(split.command, ElementsAre("x", "--dashboard"));
}

// Whether -n was given at all is RunRun's to check, as are the values.
TEST(RunSplitTest, NoOwnOptionsIsNotRefusedHere) {
  const RunArgumentSplit split = SplitRunArguments({"--", "x"});
  EXPECT_THAT(split.own, IsEmpty());
  EXPECT_THAT(split.given, IsEmpty());
  EXPECT_THAT(split.command, ElementsAre("x"));
}

TEST(RunSplitDeathTest, AnArgumentBeforeDashesIsNamed) {
  EXPECT_EXIT(SplitRunArguments({"-n", "2", "true"}), ExitedWithCode(2),
              "gradwire run: 'true' comes before --: the worker command goes "
              "after it");
}

TEST(RunSplitDeathTest, UnknownOptionsAreNamedAsGiven) {
  EXPECT_EXIT(SplitRunArguments({"-n", "2", "--lr=0.1", "--", "x"}),
              ExitedWithCode(2),
              "gradwire run: unknown option --lr=0\\.1 \\(the worker command "
              "and its flags go after --\\)");
  EXPECT_EXIT(SplitRunArguments({"-n2", "--", "x"}), ExitedWithCode(2),
              "unknown option -n2");
  EXPECT_EXIT(SplitRunArguments({"--nokeep-logs-x", "--", "x"}),
              ExitedWithCode(2), "unknown option --nokeep-logs-x");
}

TEST(RunSplitDeathTest, AValueMustFollow) {
  EXPECT_EXIT(SplitRunArguments({"-n", "2", "--run-dir"}), ExitedWithCode(2),
              "missing value for --run-dir");
  EXPECT_EXIT(SplitRunArguments({"-n"}), ExitedWithCode(2),
              "missing value for -n");
}

TEST(RunSplitDeathTest, TheWorkersMustBeAnInteger) {
  for (const char* bad : {"two", "", "2.5", "2x"}) {
    EXPECT_EXIT(SplitRunArguments({absl::StrCat("-n=", bad), "--", "x"}),
                ExitedWithCode(2),
                absl::StrCat("-n: '", bad, "' is not a number of workers"))
        << bad;
  }
}

TEST(RunSplitDeathTest, TheWorkerCommandIsRequired) {
  EXPECT_EXIT(SplitRunArguments({"-n", "2"}), ExitedWithCode(2),
              "missing -- before the worker command");
  EXPECT_EXIT(SplitRunArguments({"-n", "2", "--"}), ExitedWithCode(2),
              "no worker command after --");
}

}  // namespace
}  // namespace gradwire::cli
