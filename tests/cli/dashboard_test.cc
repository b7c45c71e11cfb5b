// The pieces of `gradwire local --dashboard` that need no Prometheus: its
// configuration, the workers' targets file, the port it gets and the
// readiness check (against a one-answer HTTP server on loopback).
#include "cli/dashboard.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

// A loopback server that answers one connection with `answer`.
class OneAnswerServer {
 public:
  explicit OneAnswerServer(std::string answer) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, answer = std::move(answer)] {
      const int client = accept(fd_, nullptr, nullptr);
      char request[256];
      (void)!recv(client, request, sizeof(request), 0);
      (void)!send(client, answer.data(), answer.size(), 0);
      close(client);
    });
  }
  ~OneAnswerServer() {
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

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
