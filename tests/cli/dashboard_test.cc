// The pieces of the dashboard (gradwire local and run) that need no
// Prometheus: its configuration, the workers' targets file, the port it
// gets and the readiness check (against a one-answer HTTP server on
// loopback).
#include "cli/dashboard.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/one_answer_server.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;

TEST(DashboardTest, ConfigScrapesTheShardsAndTheWorkersFile) {
  const std::string config =
      PrometheusConfig({"127.0.0.1:7001", "127.0.0.1:7002"},
                       "/run/prometheus-workers.json", absl::Seconds(1));
  EXPECT_THAT(config, HasSubstr("scrape_interval: 1s"));
  EXPECT_THAT(config, HasSubstr("job_name: gradwire-shard\n"
                                "    static_configs:\n"
                                "      - targets: [\"127.0.0.1:7001\", "
                                "\"127.0.0.1:7002\"]"));
  EXPECT_THAT(config, HasSubstr("job_name: gradwire-worker\n"
                                "    file_sd_configs:\n"
                                "      - files: "
                                "[\"/run/prometheus-workers.json\"]"));
}

TEST(DashboardTest, TargetsFileListsTheWorkers) {
  EXPECT_EQ(FileDiscoveryTargets({}), "[{\"targets\": [], \"labels\": {}}]\n");
  EXPECT_EQ(FileDiscoveryTargets({"127.0.0.1:1", "127.0.0.1:2"}),
            "[{\"targets\": [\"127.0.0.1:1\", \"127.0.0.1:2\"], "
            "\"labels\": {}}]\n");
  EXPECT_EQ(DashboardUrl(9090), "http://127.0.0.1:9090/consoles/gradwire.html");
}

TEST(DashboardTest, WritesFilesWhole) {
  const std::string dir = ::testing::TempDir() + "/dashboard_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/targets.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(ReadFile(path), "second");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const absl::Status missing = WriteFileAtomically(dir + "/no/such", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnavailable);
  std::filesystem::remove_all(dir);
}

TEST(DashboardTest, ReadyOnlyWhenPrometheusAnswers200) {
  {
    OneAnswerServer ready("HTTP/1.0 200 OK\r\n\r\nPrometheus is Ready.\n");
    EXPECT_TRUE(CheckPrometheusReady(ready.port(), absl::Seconds(5)).ok());
  }
  {
    OneAnswerServer starting(
        "HTTP/1.1 503 Service Unavailable\r\n\r\nService Unavailable");
    const absl::Status s =
        CheckPrometheusReady(starting.port(), absl::Seconds(5));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("503"));
  }
  // A port nobody listens on: the one just picked as free.
  absl::StatusOr<int> free_port = PickFreeLoopbackPort();
  ASSERT_TRUE(free_port.ok()) << free_port.status();
  EXPECT_GT(*free_port, 0);
  EXPECT_EQ(CheckPrometheusReady(*free_port, absl::Seconds(1)).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gradwire::cli
