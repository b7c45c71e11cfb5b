// The summary of a `gradwire local` run from its workers' summary files:
// byte counts summed, times the largest, accuracy from worker 0.
#include "cli/cluster_summary.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/run_directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path =
      absl::StrCat("/tmp/gradwire-summary-", getpid(), "-", name);
  std::ofstream(path) << text;
  return path;
}

std::string Summary(int worker, int pushed, double wall) {
  return absl::StrCat(
      "{\"test_accuracy\": 0.", 5 + worker, ", \"steps\": 40, ",
      "\"wall_seconds\": ", wall, ", \"pushed_bytes\": ", pushed,
      ", \"pulled_bytes\": 10, \"dense_equivalent_bytes\": 1000, ",
      "\"worker_id\": ", worker, ", \"compressor\": \"topk\"}\n");
}

TEST(SummariseClusterTest, CombinesTheWorkersAndWritesTheClusterSummary) {
  const std::vector<std::string> workers = {
      WriteTemp("w0.json", Summary(0, 100, 2.5)),
      WriteTemp("w1.json", Summary(1, 300, 3.5))};
  const std::string out =
      absl::StrCat("/tmp/gradwire-summary-", getpid(), "-cluster.json");
  absl::StatusOr<std::string> report =
      SummariseCluster(workers, 2, out, absl::Seconds(9));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr("2 workers, 2 shards, 40 steps"));
  EXPECT_THAT(*report, HasSubstr("test accuracy  0.5000 (worker 0)"));
  EXPECT_THAT(*report, HasSubstr("pushed         400 B (dense fp32 would be "
                                 "2.0 kB, 5.0x less)"));
  absl::StatusOr<FlatJson> cluster = ParseFlatJson(ReadFile(out));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(FindMember(*cluster, "pushed_bytes")->text, "400");
  EXPECT_DOUBLE_EQ(FindMember(*cluster, "wall_seconds")->number, 3.5);
  EXPECT_EQ(FindMember(*cluster, "compressor")->text, "topk");
  EXPECT_EQ(FindMember(*cluster, "worker_id"), nullptr);
  for (const std::string& path : workers) std::remove(path.c_str());
  std::remove(out.c_str());
}

TEST(SummariseClusterTest, AMissingSummaryIsDataLossNamingTheFile) {
  const std::string missing = "/nonexistent/worker-1.json";
  absl::StatusOr<std::string> report =
      SummariseCluster({missing}, 1, "", absl::Seconds(1));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(report.status().message(), HasSubstr(missing));
}

}  // namespace
}  // namespace gradwire::cli
