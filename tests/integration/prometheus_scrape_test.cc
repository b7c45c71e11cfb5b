// A real Prometheus server (Debian's `prometheus`, on a free port with a
// temporary config and storage directory) scrapes a running cluster of two
// shards and two workers; a PromQL query over its HTTP API must return each
// worker's pushed-bytes counter with the value the worker's summary reports.
// A live worker's /metrics passes `promtool check metrics` on the way.
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// "%XX" for every byte outside [A-Za-z0-9-_.~].
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

size_t CountOf(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + part.size())) {
    ++count;
  }
  return count;
}

// From a Prometheus instant-query answer of `max by (worker) (...)`, the
// value of the series with worker="id"; -1 if it is not there.
double QueryValueForWorker(const std::string& answer, const std::string& id) {
  const size_t series = answer.find("\"worker\":\"" + id + "\"");
  if (series == std::string::npos) return -1;
  const size_t value = answer.find("\"value\":[", series);
  if (value == std::string::npos) return -1;
  const size_t open = answer.find(",\"", value);
  const size_t close = answer.find('"', open + 2);
  double number = -1;
  if (!absl::SimpleAtod(answer.substr(open + 2, close - open - 2), &number)) {
    return -1;
  }
  return number;
}

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      (void)WaitForExit(pid, absl::Seconds(5));
    }
  }

  // Starts Prometheus scraping `shards` and `workers` (ports on 127.0.0.1)
  // every second; returns the port of its HTTP API once it is ready.
  int StartPrometheus(const std::vector<int>& shards,
                      const std::vector<int>& workers) {
    const auto targets = [](const std::vector<int>& ports) {
      std::vector<std::string> quoted;
      for (int port : ports)
        quoted.push_back(absl::StrCat("'127.0.0.1:", port, "'"));
      return absl::StrJoin(quoted, ", ");
    };
    const std::string config = dir_.path() + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n"
                          << "scrape_configs:\n"
                          << "  - job_name: gradwire-shard\n"
                          << "    static_configs:\n      - targets: ["
                          << targets(shards) << "]\n"
                          << "  - job_name: gradwire-worker\n"
                          << "    static_configs:\n      - targets: ["
                          << targets(workers) << "]\n";
    const int port = PickFreeLoopbackPort();
    absl::StatusOr<pid_t> pid = SpawnProcess(
        {kPrometheus, "--config.file=" + config,
         "--storage.tsdb.path=" + dir_.path() + "/tsdb",
         absl::StrCat("--web.listen-address=127.0.0.1:", port),
         "--log.level=warn"},
        dir_.path() + "/prometheus.out", dir_.path() + "/prometheus.err");
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return 0;
    children_.push_back(*pid);
    // Ready, and scraping the shards: Prometheus hands discovered targets
    // to its scrapers every 5 s, so the first scrape comes a while after
    // it is ready.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto targets = metrics_test::HttpRequest(port, "/api/v1/targets");
      if (targets.ok() && targets->status == 200 &&
          CountOf(targets->body, "\"health\":\"up\"") >= shards.size()) {
        return port;
      }
      absl::SleepFor(absl::Milliseconds(250));
    }
    ADD_FAILURE() << "Prometheus did not scrape the shards within 60 s: "
                  << ReadFileOrEmpty(dir_.path() + "/prometheus.err");
    return 0;
  }

  TempDir dir_;
  std::vector<pid_t> children_;
};

TEST_F(PrometheusScrapeTest, QueriedPushedBytesMatchTheWorkersSummaries) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: scripts/install-deps.sh installs the "
      << "Debian package prometheus";
  const char* worker_bin = std::getenv("GRADWIRE_WORKER_BIN");
  ASSERT_NE(worker_bin, nullptr) << "GRADWIRE_WORKER_BIN is not set";

  std::vector<std::unique_ptr<ServerProcess>> shards;
  std::vector<int> shard_metrics;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    const int metrics_port = PickFreeLoopbackPort();
    auto shard =
        ServerProcess::Start({absl::StrCat("--shard-id=", i), "--num-shards=2",
                              "--num-workers=2", "--metrics-address=127.0.0.1",
                              absl::StrCat("--metrics-port=", metrics_port)});
    ASSERT_TRUE(shard.ok()) << shard.status();
    addresses.push_back((*shard)->target());
    shard_metrics.push_back(metrics_port);
    shards.push_back(std::move(*shard));
  }
  const std::vector<int> worker_metrics = {PickFreeLoopbackPort(),
                                           PickFreeLoopbackPort()};
  const int prometheus = StartPrometheus(shard_metrics, worker_metrics);
  ASSERT_GT(prometheus, 0);

  std::vector<pid_t> workers;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<pid_t> pid = SpawnProcess(
        {worker_bin, "--shards=" + absl::StrJoin(addresses, ","),
         absl::StrCat("--worker-id=", i), "--num-workers=2", "--model=mlp",
         "--max-steps=30", "--train-limit=4000", "--test-limit=500",
         "--progress=log", "--metrics-address=127.0.0.1",
         absl::StrCat("--metrics-port=", worker_metrics[i]),
         // Three scrape intervals after the last step.
         "--metrics-linger-seconds=3",
         absl::StrCat("--summary-json=", dir_.path(), "/worker-", i, ".json")},
        absl::StrCat(dir_.path(), "/worker-", i, ".out"),
        absl::StrCat(dir_.path(), "/worker-", i, ".err"));
    ASSERT_TRUE(pid.ok()) << pid.status();
    workers.push_back(*pid);
    children_.push_back(*pid);
  }
  // A live worker's /metrics (training, or lingering after it) passes
  // promtool with nothing to report.
  std::string worker_text;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline &&
         worker_text.find("gradwire_worker_steps_total") == std::string::npos) {
    auto scraped = metrics_test::HttpRequest(worker_metrics[0], "/metrics");
    if (scraped.ok() && scraped->status == 200) worker_text = scraped->body;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_THAT(worker_text, ::testing::HasSubstr("gradwire_worker_steps_total"));
  auto promtool = metrics_test::PromtoolCheckMetrics(worker_text);
  ASSERT_TRUE(promtool.ok()) << promtool.status();
  EXPECT_EQ(promtool->exit_code, 0) << promtool->output;
  EXPECT_EQ(promtool->output, "") << worker_text;

  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<int> code = WaitForExit(workers[i], absl::Seconds(120));
    ASSERT_TRUE(code.ok()) << code.status();
    ASSERT_EQ(*code, 0) << ReadFileOrEmpty(
        absl::StrCat(dir_.path(), "/worker-", i, ".err"));
  }

  // The workers are gone: their series are stale now, so ask for the
  // largest value seen over the run.
  const std::string query = UrlEncode(
      "max by (worker) (max_over_time("
      "gradwire_worker_sent_bytes_total{rpc=\"push\"}[5m]))");
  auto answer =
      metrics_test::HttpRequest(prometheus, "/api/v1/query?query=" + query);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_THAT(answer->body, ::testing::HasSubstr("\"status\":\"success\""));
  for (int i = 0; i < 2; ++i) {
    const std::string summary =
        ReadFileOrEmpty(absl::StrCat(dir_.path(), "/worker-", i, ".json"));
    double pushed = -1;
    ASSERT_TRUE(
        absl::SimpleAtod(SummaryField(summary, "pushed_bytes"), &pushed))
        << summary;
    ASSERT_GT(pushed, 0) << summary;
    EXPECT_EQ(QueryValueForWorker(answer->body, absl::StrCat(i)), pushed)
        << "worker " << i << ": " << answer->body;
  }

  // The shards' side is there too: both received pushes.
  auto shard_answer = metrics_test::HttpRequest(
      prometheus,
      "/api/v1/query?query=" +
          UrlEncode("sum by (shard) (gradwire_shard_pushes_total{result="
                    "\"accepted\"})"));
  ASSERT_TRUE(shard_answer.ok()) << shard_answer.status();
  EXPECT_THAT(shard_answer->body, ::testing::HasSubstr("\"shard\":\"0\""));
  EXPECT_THAT(shard_answer->body, ::testing::HasSubstr("\"shard\":\"1\""));
}

}  // namespace
}  // namespace gradwire::testing
