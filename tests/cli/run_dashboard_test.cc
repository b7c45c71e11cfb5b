// The dashboard's lifecycle in a run, without Prometheus: a script stands
// in for it, and a one-answer HTTP server for its /-/ready. Start writes
// the configuration and waits for readiness, AddWorker the targets file,
// Linger waits, Stop ends it; a Prometheus that exits or is never ready
// fails the start, as a failure of the run.
#include "cli/run_dashboard.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/loopback_http.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/one_answer_server.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;

class RunDashboardTest : public ::testing::Test {
 protected:
  RunDashboardTest()
      : dir_(::testing::TempDir() + "/run_dashboard_test"),
        run_(dir_),
        info_(std::tmpfile()),
        supervision_("gradwire test", info_, absl::Seconds(5)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.enabled = true;
    options_.consoles = dir_ + "/consoles";
    options_.prometheus = dir_ + "/fake-prometheus";
    // Runs until stopped, whatever its flags.
    std::ofstream(options_.prometheus) << "#!/bin/sh\nexec sleep 60\n";
    chmod(options_.prometheus.c_str(), 0755);
  }
  ~RunDashboardTest() override {
    std::fclose(info_);
    std::filesystem::remove_all(dir_);
  }
  // What the supervision informed of.
  std::string Informed() {
    std::fflush(info_);
    std::rewind(info_);
    std::string text;
    char buffer[512];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), info_)) {
      text.append(buffer, n);
    }
    return text;
  }

  const std::string dir_;
  const RunDirectory run_;
  std::FILE* const info_;
  Supervision supervision_;
  DashboardOptions options_;
};

TEST_F(RunDashboardTest, NothingHappensBeforeStart) {
  options_.linger = absl::Seconds(60);
  RunDashboard dashboard(options_, run_, supervision_);
  EXPECT_FALSE(dashboard.ready());
  dashboard.AddWorker(7100);
  EXPECT_FALSE(std::filesystem::exists(run_.PrometheusWorkerTargets()));
  const absl::Time start = absl::Now();
  dashboard.Linger();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  dashboard.CheckRunning("now");
  dashboard.Stop();
  EXPECT_FALSE(supervision_.failed());
}

TEST_F(RunDashboardTest, StartsScrapesTheWorkersLingersAndStops) {
  OneAnswerServer ready("HTTP/1.0 200 OK\r\n\r\nPrometheus is Ready.\n");
  options_.port = ready.port();
  options_.linger = absl::Milliseconds(300);
  // An earlier run's storage in a reused run directory.
  std::filesystem::create_directories(run_.PrometheusData() + "/old");
  RunDashboard dashboard(options_, run_, supervision_);
  const absl::Status started =
      dashboard.Start({"127.0.0.1:7001"}, absl::Seconds(30));
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_TRUE(dashboard.ready());
  EXPECT_EQ(dashboard.port(), ready.port());
  EXPECT_FALSE(std::filesystem::exists(run_.PrometheusData() + "/old"));
  EXPECT_THAT(ReadFile(run_.PrometheusConfig()),
              HasSubstr("targets: [\"127.0.0.1:7001\"]"));
  EXPECT_EQ(ReadFile(run_.PrometheusWorkerTargets()), FileDiscoveryTargets({}));
  EXPECT_THAT(Informed(), HasSubstr(absl::StrCat("dashboard at ",
                                                 DashboardUrl(ready.port()))));

  dashboard.AddWorker(7100);
  dashboard.AddWorker(7101);
  EXPECT_EQ(ReadFile(run_.PrometheusWorkerTargets()),
            FileDiscoveryTargets({"127.0.0.1:7100", "127.0.0.1:7101"}));
  dashboard.CheckRunning("while the workers ran");
  EXPECT_FALSE(supervision_.failed());

  const absl::Time start = absl::Now();
  dashboard.Linger();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_THAT(Informed(), HasSubstr("dashboard stays up for 300ms"));
  dashboard.Stop();
  EXPECT_FALSE(supervision_.failed());
}

// Joined shards: no shard target, the workers' file all the same.
TEST_F(RunDashboardTest, WithoutShardsItScrapesTheWorkersOnly) {
  OneAnswerServer ready("HTTP/1.0 200 OK\r\n\r\n");
  options_.port = ready.port();
  RunDashboard dashboard(options_, run_, supervision_);
  ASSERT_TRUE(dashboard.Start({}, absl::Seconds(30)).ok());
  EXPECT_THAT(ReadFile(run_.PrometheusConfig()), HasSubstr("targets: []"));
  EXPECT_THAT(ReadFile(run_.PrometheusConfig()),
              HasSubstr(run_.PrometheusWorkerTargets()));
  dashboard.Stop();
}

TEST_F(RunDashboardTest, APrometheusThatExitsFailsTheStart) {
  options_.prometheus = "/bin/false";
  absl::StatusOr<int> port = PickFreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  options_.port = *port;
  RunDashboard dashboard(options_, run_, supervision_);
  const absl::Status started = dashboard.Start({}, absl::Seconds(30));
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_FALSE(dashboard.ready());
  ASSERT_TRUE(supervision_.failed());
  EXPECT_EQ(supervision_.failures()[0].name, "prometheus");
  dashboard.Stop();
}

TEST_F(RunDashboardTest, APrometheusNeverReadyTimesOut) {
  absl::StatusOr<int> port = PickFreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  options_.port = *port;  // Nobody answers there.
  RunDashboard dashboard(options_, run_, supervision_);
  const absl::Status started = dashboard.Start({}, absl::Milliseconds(300));
  EXPECT_EQ(started.code(), absl::StatusCode::kDeadlineExceeded) << started;
  ASSERT_TRUE(supervision_.failed());
  EXPECT_EQ(supervision_.failures()[0].name, "prometheus");
  const absl::Time stop = absl::Now();
  dashboard.Stop();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(5));
}

}  // namespace
}  // namespace gradwire::cli
