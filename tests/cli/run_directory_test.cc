// The run directory of `gradwire local`: file names, port files, and the
// directory made for a run.
#include "cli/run_directory.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

TEST(RunDirectoryTest, NamesEachProcesssFiles) {
  const RunDirectory run("/run");
  EXPECT_EQ(run.ShardPortFile(3), "/run/shard-3.port");
  EXPECT_EQ(run.ShardMetricsPortFile(3), "/run/shard-3.metrics-port");
  EXPECT_EQ(run.WorkerSummary(0), "/run/worker-0.json");
  EXPECT_EQ(run.WorkerLog(2), "/run/worker-2.log");
  EXPECT_EQ(MetricsUrl(9100), "http://127.0.0.1:9100/metrics");
}

TEST(RunDirectoryTest, PortFromFileIsZeroUntilTheFileHoldsAPort) {
  auto made = MakeRunDirectory("", /*keep_logs=*/false);
  ASSERT_TRUE(made.ok()) << made.status();
  const RunDirectory& run = made->first;
  EXPECT_TRUE(made->second);  // Fresh: removed after a successful run.
  EXPECT_TRUE(std::filesystem::is_directory(run.dir()));
  EXPECT_EQ(PortFromFile(run.ShardPortFile(0)), 0);
  std::ofstream(run.ShardPortFile(0)) << "7000\n";
  EXPECT_EQ(PortFromFile(run.ShardPortFile(0)), 7000);
  std::filesystem::remove_all(run.dir());
}

TEST(RunDirectoryTest, AGivenLogDirIsCreatedAndKept) {
  auto fresh = MakeRunDirectory("", /*keep_logs=*/true);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->second);  // --keep-logs.
  const std::string nested = fresh->first.Path("a/b");
  auto given = MakeRunDirectory(nested, /*keep_logs=*/false);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->first.dir(), nested);
  EXPECT_FALSE(given->second);
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  std::filesystem::remove_all(fresh->first.dir());
}

}  // namespace
}  // namespace gradwire::cli
