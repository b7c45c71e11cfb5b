// The workers' CPU accounts in a `gradwire local` run: summed over the
// workers, communication against compute, and the report's line per step.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/cluster_summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::ordered_json;

Json Worker(int id) {
  Json summary = Json::object();
  summary["test_accuracy"] = 0.5;
  summary["steps"] = 10;
  summary["wall_seconds"] = 2.0;
  summary["pushed_bytes"] = 1000;
  summary["pulled_bytes"] = 3000;
  summary["dense_equivalent_bytes"] = 100000;
  summary["worker_id"] = id;
  return summary;
}

// A worker with an account of `steps` steps: `compute` seconds, and
// `compress` and `rpc` seconds of communication.
Json AccountingWorker(int id, int steps, double compute, double compress,
                      double rpc) {
  Json summary = Worker(id);
  summary["cpu_steps"] = steps;
  summary["cpu_compute_seconds"] = compute;
  summary["cpu_communication_seconds"] = compress + rpc;
  summary["cpu_communication_ratio"] = (compress + rpc) / compute;
  summary["cpu_seconds_by_activity"] = {{"compress", compress}, {"rpc", rpc}};
  return summary;
}

TEST(ClusterSummaryCpuTest, SumsTheAccountsOfEveryWorker) {
  absl::StatusOr<Json> cluster =
      CombineWorkerSummaries({AccountingWorker(0, 10, 1.0, 0.05, 0.02),
                              AccountingWorker(1, 10, 3.0, 0.15, 0.18)},
                             2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*cluster)["cpu_steps"], 20);
  EXPECT_DOUBLE_EQ((*cluster)["cpu_compute_seconds"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ((*cluster)["cpu_communication_seconds"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ((*cluster)["cpu_communication_ratio"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(
      (*cluster)["cpu_seconds_by_activity"]["compress"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ((*cluster)["cpu_seconds_by_activity"]["rpc"].get<double>(),
                   0.2);
}

TEST(ClusterSummaryCpuTest, ReportsPerStepLargestFirst) {
  absl::StatusOr<Json> cluster =
      CombineWorkerSummaries({AccountingWorker(0, 10, 1.0, 0.05, 0.02),
                              AccountingWorker(1, 10, 3.0, 0.15, 0.28)},
                             2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string report = ClusterReport(*cluster, absl::Seconds(3));
  // 0.5 s of communication and 4 s of compute over 20 worker-steps.
  EXPECT_THAT(report, HasSubstr("worker CPU     communication 25.00 ms/step "
                                "against compute 200.00 ms/step (12.5%)"));
  EXPECT_THAT(report,
              HasSubstr("by activity, ms/step: rpc 15.00, compress 10.00\n"));
}

TEST(ClusterSummaryCpuTest, NoLineWithoutAnAccount) {
  absl::StatusOr<Json> cluster = CombineWorkerSummaries({Worker(0)}, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(3)),
              Not(HasSubstr("worker CPU")));
}

TEST(ClusterSummaryCpuTest, AWorkerWithoutAnAccountLeavesWorkerZeros) {
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(
      {AccountingWorker(0, 10, 1.0, 0.05, 0.02), Worker(1)}, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_DOUBLE_EQ(
      (*cluster)["cpu_seconds_by_activity"]["compress"].get<double>(), 0.05);
}

}  // namespace
}  // namespace gradwire::cli
