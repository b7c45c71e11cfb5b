// The summary of a `gradwire run` from the shards' /metrics texts: samples
// found by name and labels, totals over shards, and the report's lines.
#include "cli/shard_metrics_summary.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;

// What a shard exposes, cut to the families the summary reads.
std::string ShardText(int shard, int pushed, int pulled, int clock) {
  const std::string s = std::to_string(shard);
  return "# HELP gradwire_shard_received_bytes_total Serialized size.\n"
         "# TYPE gradwire_shard_received_bytes_total counter\n"
         "gradwire_shard_received_bytes_total{rpc=\"pull\",shard=\"" +
         s + "\"} 5\n" +
         "gradwire_shard_received_bytes_total{rpc=\"push\",shard=\"" + s +
         "\"} " + std::to_string(pushed) + "\n" +
         "gradwire_shard_sent_bytes_total{rpc=\"pull\",shard=\"" + s + "\"} " +
         std::to_string(pulled) + "\n" +
         "gradwire_shard_sent_bytes_total{rpc=\"push\",shard=\"" + s +
         "\"} 7\n" +
         "gradwire_shard_pushes_total{result=\"accepted\",shard=\"" + s +
         "\"} 4\n" + "gradwire_shard_pushes_total{result=\"invalid\",shard=\"" +
         s + "\"} 1\n" + "gradwire_shard_chunk_clock_min{shard=\"" + s +
         "\"} " + std::to_string(clock) + "\n";
}

TEST(ShardMetricsSummaryTest, SumsSamplesWithTheGivenLabels) {
  const std::string text =
      "# TYPE m counter\n"
      "m{a=\"x\",b=\"1\"} 2\n"
      "m{a=\"x\",b=\"2\"} 3.5 1700000000000\n"
      "m{a=\"y\"} 100\n"
      "m_other 9\n"
      "m{a=\"quote \\\"x\\\", comma\"} 1000\n"
      "m 0.25\n";
  EXPECT_EQ(SumOfSamples(text, "m", {{"a", "x"}}), 5.5);
  EXPECT_EQ(SumOfSamples(text, "m", {{"a", "quote \"x\", comma"}}), 1000);
  EXPECT_EQ(SumOfSamples(text, "m"), 1105.75);
  EXPECT_EQ(SumOfSamples(text, "m_other"), 9);
  EXPECT_FALSE(SumOfSamples(text, "absent").has_value());
  EXPECT_FALSE(SumOfSamples(text, "m", {{"a", "z"}}).has_value());
}

TEST(ShardMetricsSummaryTest, TotalsOverShardsTakeTheSlowestClock) {
  const ShardTotals t =
      TotalShardMetrics({ShardText(0, 100, 300, 20), ShardText(1, 50, 30, 19)});
  EXPECT_EQ(t.shards, 2);
  EXPECT_EQ(t.pushed_bytes, 150u);
  EXPECT_EQ(t.pulled_bytes, 330u);
  EXPECT_EQ(t.accepted_pushes, 8u);
  EXPECT_EQ(t.steps, 19);
}

TEST(ShardMetricsSummaryTest, AShardNeverInitializedHasNoSteps) {
  const ShardTotals t =
      TotalShardMetrics({ShardText(0, 100, 300, 20),
                         "gradwire_shard_initialized{shard=\"1\"} 0\n"});
  EXPECT_FALSE(t.steps.has_value());
  EXPECT_EQ(t.pushed_bytes, 100u);
}

TEST(ShardMetricsSummaryTest, ReportSaysWhereItsNumbersComeFrom) {
  const std::string report = ShardTotalsReport(
      "gradwire run", TotalShardMetrics({ShardText(0, 2000, 3000, 12)}), 2,
      absl::Seconds(3));
  EXPECT_THAT(report,
              HasSubstr("gradwire run: 2 workers, 1 shards, 12 steps (from "
                        "the shards' metrics"));
  EXPECT_THAT(report, HasSubstr("pushed         2.0 kB in 4 accepted pushes"));
  EXPECT_THAT(report, HasSubstr("pulled         3.0 kB"));
  EXPECT_THAT(report, HasSubstr("3.0 s in all"));
}

}  // namespace
}  // namespace gradwire::cli
