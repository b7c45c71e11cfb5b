// The summary of a `gradwire local` run from its workers' summary files:
// byte counts summed, times the largest, accuracy from worker 0.
#include "cli/cluster_summary.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/run_directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

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
      "\"worker_id\": ", worker, ", \"push_bucket_bytes\": 1048576, ",
      "\"compressor\": \"topk\"}\n");
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
  const std::string text = ReadFile(out);
  // One line with a space after ':' and ',', as gradwire-worker writes: the
  // line-based readers of summaries (sed in bench/*/*.sh) rely on it.
  EXPECT_THAT(text, StartsWith("{\"test_accuracy\": 0.5, \"steps\": 40, "));
  EXPECT_THAT(text, HasSubstr("\"pushed_bytes\": 400, "));
  EXPECT_THAT(text, EndsWith("}\n"));
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;
  const Json cluster = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(cluster.is_object()) << text;
  EXPECT_TRUE(cluster["pushed_bytes"].is_number_unsigned());
  EXPECT_EQ(cluster["pushed_bytes"], 400);
  EXPECT_DOUBLE_EQ(cluster["wall_seconds"].get<double>(), 3.5);
  EXPECT_EQ(cluster["compressor"], "topk");
  // A setting ending in _bytes is not summed.
  EXPECT_EQ(cluster["push_bucket_bytes"], 1048576);
  EXPECT_FALSE(cluster.contains("worker_id"));
  EXPECT_EQ(cluster["workers"], 2);
  EXPECT_EQ(cluster["shards"], 2);
  EXPECT_DOUBLE_EQ(cluster["compression_ratio"].get<double>(), 5.0);
  // Dense would push 2 kB and pull as much; 400 B went up, 20 B came down.
  EXPECT_DOUBLE_EQ(cluster["total_compression_ratio"].get<double>(),
                   4000.0 / 420.0);
  EXPECT_THAT(*report, HasSubstr("both ways 9.5x less"));
  for (const std::string& path : workers) std::remove(path.c_str());
  std::remove(out.c_str());
}

TEST(CombineWorkerSummariesTest, KeepsWorkerZerosKeyOrderThenAddsTheTotals) {
  const std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                                     Json::parse(Summary(1, 300, 3.5))};
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 3);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::string> keys;
  for (const auto& member : cluster->items()) keys.push_back(member.key());
  EXPECT_THAT(
      keys,
      ElementsAre("test_accuracy", "steps", "wall_seconds", "pushed_bytes",
                  "pulled_bytes", "dense_equivalent_bytes", "push_bucket_bytes",
                  "compressor", "workers", "shards", "compression_ratio",
                  "total_compression_ratio"));
  EXPECT_EQ((*cluster)["pulled_bytes"], 20);
}

TEST(CombineWorkerSummariesTest, SumsThatAreNotAllIntegersAreReal) {
  std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                               Json::parse(Summary(1, 300, 3.5))};
  workers[1]["pulled_bytes"] = 0.5;
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE((*cluster)["pulled_bytes"].is_number_float());
  EXPECT_DOUBLE_EQ((*cluster)["pulled_bytes"].get<double>(), 10.5);
}

TEST(CombineWorkerSummariesTest, AMissingNumberIsInvalidArgumentNamingIt) {
  std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                               Json::parse(Summary(1, 300, 3.5))};
  workers[0].erase("test_accuracy");
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 1);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.status().message(),
            "the summary of worker 0 has no number \"test_accuracy\"");

  workers = {Json::parse(Summary(0, 100, 2.5)),
             Json::parse(Summary(1, 300, 3.5))};
  workers[1]["pushed_bytes"] = "300";
  cluster = CombineWorkerSummaries(workers, 1);
  EXPECT_EQ(cluster.status().message(),
            "the summary of worker 1 has no number \"pushed_bytes\"");
}

// A run with --evaluate=false has no accuracy anywhere, and its summary is
// written all the same.
TEST(CombineWorkerSummariesTest, WorkersThatDidNotEvaluateNeedNoAccuracy) {
  std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                               Json::parse(Summary(1, 300, 3.5))};
  for (Json& w : workers) {
    w.erase("test_accuracy");
    w["evaluated"] = false;
  }
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_FALSE(cluster->contains("test_accuracy"));
  EXPECT_EQ((*cluster)["evaluated"], false);
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("test accuracy  not evaluated\n"));
  // A summary that says it evaluated must carry the number.
  workers[0]["evaluated"] = true;
  EXPECT_EQ(CombineWorkerSummaries(workers, 1).status().message(),
            "the summary of worker 0 has no number \"test_accuracy\"");
}

TEST(CombineWorkerSummariesTest, OnlyWorkerZeroNeedsAnAccuracy) {
  std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                               Json::parse(Summary(1, 300, 3.5))};
  workers[1].erase("test_accuracy");
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_DOUBLE_EQ((*cluster)["test_accuracy"].get<double>(), 0.5);
}

TEST(CombineWorkerSummariesTest, StartUpIsSummedAndTheSlowestReported) {
  std::vector<Json> workers = {Json::parse(Summary(0, 100, 2.5)),
                               Json::parse(Summary(1, 300, 3.5))};
  // Without start-up figures (older workers) the report has no such line.
  absl::StatusOr<Json> without = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_THAT(ClusterReport(*without, absl::Seconds(1)),
              ::testing::Not(HasSubstr("start-up")));
  workers[0]["startup_sent_bytes"] = 3000;
  workers[0]["startup_received_bytes"] = 50;
  workers[0]["startup_seconds"] = 1.25;
  workers[1]["startup_sent_bytes"] = 200;
  workers[1]["startup_received_bytes"] = 70;
  workers[1]["startup_seconds"] = 0.5;
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*cluster)["startup_sent_bytes"], 3200);
  EXPECT_EQ((*cluster)["startup_received_bytes"], 120);
  EXPECT_DOUBLE_EQ((*cluster)["startup_seconds"].get<double>(), 1.25);
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("  start-up       3.2 kB sent, 120 B received before "
                        "step 0, 1.2 s (slowest worker)\n"));
}

TEST(CombineWorkerSummariesTest, NoWorkerIsInvalidArgument) {
  EXPECT_EQ(CombineWorkerSummaries({}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SummariseClusterTest, AMissingSummaryIsDataLossNamingTheFile) {
  const std::string missing = "/nonexistent/worker-1.json";
  absl::StatusOr<std::string> report =
      SummariseCluster({missing}, 1, "", absl::Seconds(1));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(report.status().message(), HasSubstr(missing));
}

// A summary that is not a JSON object is an error status naming the file,
// never an exception.
TEST(SummariseClusterTest, AMalformedSummaryIsDataLossNamingTheFile) {
  for (const std::string& text :
       {std::string("{\"steps\": 40,"), std::string("[1, 2]"),
        std::string("{\"steps\": 4x}"), std::string("\xff\xfe")}) {
    const std::string path = WriteTemp("malformed.json", text);
    absl::StatusOr<std::string> report =
        SummariseCluster({path}, 1, "", absl::Seconds(1));
    EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(report.status().message(), HasSubstr("cannot read " + path))
        << text;
    std::remove(path.c_str());
  }
}

TEST(SummariseClusterTest, ASummaryWithoutARequiredNumberIsInvalidArgument) {
  const std::string path =
      WriteTemp("no-accuracy.json",
                "{\"steps\": 40, \"wall_seconds\": 1, \"pushed_bytes\": 1, "
                "\"pulled_bytes\": 1, \"dense_equivalent_bytes\": 1}\n");
  absl::StatusOr<std::string> report =
      SummariseCluster({path}, 1, "", absl::Seconds(1));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "the summary of worker 0 has no number \"test_accuracy\"");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gradwire::cli
