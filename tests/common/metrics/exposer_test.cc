// The /metrics endpoint over real sockets.
#include "common/metrics/exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"

namespace gradwire::metrics {
namespace {

using ::gradwire::metrics_test::HttpRequest;
using ::gradwire::metrics_test::HttpResponse;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A connected TCP socket to `address`:`port` (IPv4 or IPv6 literal), with
// 10 s timeouts; -1 when it cannot connect.
int Connect(const std::string& address, int port) {
  struct sockaddr_storage storage = {};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<struct sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<struct sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof *v4;
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof *v6;
  } else {
    return -1;
  }
  const int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval timeout = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&storage), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes` as they are and returns everything the server answers
// until it closes the connection.
std::string Exchange(const std::string& address, int port,
                     const std::string& bytes) {
  const int fd = Connect(address, port);
  if (fd < 0) return "(cannot connect)";
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) answer.append(buffer, n);
  close(fd);
  return answer;
}

class MetricsExposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    requests_ = &registry_.AddCounterFamily({"demo_requests_total", "R."})
                     .value()
                     ->Add({{"code", "ok"}});
    requests_->Increment(7);
    ExposerOptions options;
    options.address = "127.0.0.1";
    auto exposer = Exposer::Start(options, &registry_);
    ASSERT_TRUE(exposer.ok()) << exposer.status();
    exposer_ = *std::move(exposer);
  }

  Registry registry_;
  Counter* requests_ = nullptr;
  std::unique_ptr<Exposer> exposer_;
};

TEST_F(MetricsExposerTest, PortZeroBindsAPortTheExposerReports) {
  EXPECT_GT(exposer_->port(), 0);
  EXPECT_EQ(exposer_->address(), "127.0.0.1");
}

TEST_F(MetricsExposerTest, ServesTheRegistryAtMetrics) {
  auto response = HttpRequest(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->headers["content-type"],
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response->headers["content-length"],
            std::to_string(response->body.size()));
  EXPECT_EQ(response->body, SerializeText(registry_.Collect()));
  EXPECT_THAT(response->body,
              HasSubstr("demo_requests_total{code=\"ok\"} 7\n"));
}

TEST_F(MetricsExposerTest, EachScrapeSeesCurrentValues) {
  requests_->Increment(5);
  auto response = HttpRequest(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_THAT(response->body,
              HasSubstr("demo_requests_total{code=\"ok\"} 12\n"));
}

TEST_F(MetricsExposerTest, HeadAnswersHeadersOnly) {
  auto response = HttpRequest(exposer_->port(), "/metrics", "HEAD");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "");
  EXPECT_NE(response->headers["content-length"], "0");
}

TEST_F(MetricsExposerTest, OtherPathsAreNotFound) {
  for (const char* path : {"/", "/metric", "/metrics/x", "/favicon.ico"}) {
    auto response = HttpRequest(exposer_->port(), path);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 404) << path;
    EXPECT_THAT(response->body, HasSubstr("/metrics")) << path;
  }
}

TEST_F(MetricsExposerTest, OtherMethodsAreNotAllowed) {
  auto response = HttpRequest(exposer_->port(), "/metrics", "DELETE");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 405);
  EXPECT_EQ(response->headers["allow"], "GET, HEAD");
}

TEST_F(MetricsExposerTest, AQueryStringIsIgnored) {
  auto response = HttpRequest(exposer_->port(), "/metrics?name[]=x");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->body, HasSubstr("demo_requests_total"));
}

TEST_F(MetricsExposerTest, WhatIsNotAnHttpRequestIsABadRequest) {
  for (const char* request :
       {"hello\r\n\r\n", "GET /metrics\r\n\r\n",
        "GET  /metrics HTTP/1.1\r\n\r\n", "GET /metrics FTP/1\r\n\r\n"}) {
    EXPECT_THAT(Exchange("127.0.0.1", exposer_->port(), request),
                StartsWith("HTTP/1.1 400 Bad Request\r\n"))
        << request;
  }
}

TEST_F(MetricsExposerTest, AnOversizedRequestHeadIsRefused) {
  const std::string request =
      "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(20000, 'a');
  EXPECT_THAT(Exchange("127.0.0.1", exposer_->port(), request),
              StartsWith("HTTP/1.1 431 "));
}

TEST_F(MetricsExposerTest, ASilentClientDoesNotHoldUpAScrape) {
  const int silent = Connect("127.0.0.1", exposer_->port());
  ASSERT_GE(silent, 0);
  auto response = HttpRequest(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  close(silent);
}

TEST_F(MetricsExposerTest, StoppingCutsOffAClientStillSendingItsRequest) {
  const int silent = Connect("127.0.0.1", exposer_->port());
  ASSERT_GE(silent, 0);
  send(silent, "GET /met", 8, MSG_NOSIGNAL);
  // Let a serving thread accept it and wait for the rest of the request.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  exposer_.reset();
  // Without the cut-off the destructor would wait for the client's 10 s
  // idle timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  close(silent);
}

// Sends the start of a request one byte every `interval`, never finishing
// it, until the server closes the connection or `give_up` has passed.
// Returns how long after connecting the server closed it, or give_up when
// it never did.
std::chrono::milliseconds Trickle(int port, std::chrono::milliseconds interval,
                                  std::chrono::milliseconds give_up) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
  };
  const int fd = Connect("127.0.0.1", port);
  if (fd < 0) return give_up;
  const std::string request = "GET /metrics HTTP/1.1\r\nX-Slow: ";
  for (size_t i = 0; elapsed() < give_up; ++i) {
    const char byte = i < request.size() ? request[i] : 'a';
    if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1) break;
    std::this_thread::sleep_for(interval);
    char answer;
    const ssize_t n = recv(fd, &answer, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
  }
  const std::chrono::milliseconds closed_after = elapsed();
  close(fd);
  return closed_after;
}

TEST(MetricsExposerDeadlineTest, TricklingClientsCannotHoldEveryThread) {
  Registry registry;
  ExposerOptions options;
  options.address = "127.0.0.1";
  options.threads = 2;
  options.request_deadline = absl::Milliseconds(800);
  auto exposer = Exposer::Start(options, &registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  // One byte every 200 ms: far inside the 10 s a single read may wait, so
  // only the deadline over the whole request head closes them.
  constexpr std::chrono::milliseconds kInterval(200);
  constexpr std::chrono::milliseconds kGiveUp(6000);
  std::chrono::milliseconds closed_after[2];
  std::thread first(
      [&] { closed_after[0] = Trickle(port, kInterval, kGiveUp); });
  std::thread second(
      [&] { closed_after[1] = Trickle(port, kInterval, kGiveUp); });
  first.join();
  second.join();
  for (const std::chrono::milliseconds after : closed_after) {
    EXPECT_GE(after.count(), 700);
    EXPECT_LT(after.count(), 3000) << "the server never closed it";
  }
  const auto start = std::chrono::steady_clock::now();
  auto response = HttpRequest(port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(MetricsExposerDeadlineTest, AHeadCompletedInTimeIsAnswered) {
  Registry registry;
  ExposerOptions options;
  options.address = "127.0.0.1";
  options.request_deadline = absl::Milliseconds(800);
  auto exposer = Exposer::Start(options, &registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int fd = Connect("127.0.0.1", (*exposer)->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
  for (const char byte : request) {
    send(fd, &byte, 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) answer.append(buffer, n);
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST(MetricsExposerIpv6Test, ServesOnTheIpv6Loopback) {
  Registry registry;
  ExposerOptions options;
  options.address = "::1";
  auto exposer = Exposer::Start(options, &registry);
  if (absl::IsUnavailable(exposer.status())) {
    GTEST_SKIP() << "no IPv6 loopback here: " << exposer.status();
  }
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  EXPECT_THAT(Exchange("::1", (*exposer)->port(),
                       "GET /metrics HTTP/1.1\r\nHost: [::1]\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST_F(MetricsExposerTest, ATakenPortIsUnavailableNamingTheAddress) {
  ExposerOptions options;
  options.address = "127.0.0.1";
  options.port = exposer_->port();
  auto second = Exposer::Start(options, &registry_);
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_THAT(second.status().message(),
              HasSubstr("127.0.0.1:" + std::to_string(exposer_->port())));
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
}

TEST(MetricsExposerOptionsTest, BadOptionsAreInvalidArguments) {
  Registry registry;
  for (const char* address : {"localhost", "999.1.1.1", "", "1.2.3.4:5"}) {
    ExposerOptions options;
    options.address = address;
    auto exposer = Exposer::Start(options, &registry);
    EXPECT_TRUE(absl::IsInvalidArgument(exposer.status()))
        << address << ": " << exposer.status();
  }
  ExposerOptions bad_port;
  bad_port.port = 65536;
  EXPECT_TRUE(
      absl::IsInvalidArgument(Exposer::Start(bad_port, &registry).status()));
  ExposerOptions no_threads;
  no_threads.threads = 0;
  EXPECT_TRUE(
      absl::IsInvalidArgument(Exposer::Start(no_threads, &registry).status()));
  ExposerOptions no_request_time;
  no_request_time.request_deadline = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(
      Exposer::Start(no_request_time, &registry).status()));
  ExposerOptions no_response_time;
  no_response_time.response_deadline = -absl::Seconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(
      Exposer::Start(no_response_time, &registry).status()));
}

TEST(MetricsExposerOptionsTest, AnAddressThatIsNotLocalIsUnavailable) {
  Registry registry;
  ExposerOptions options;
  // TEST-NET-1 (RFC 5737): never an address of this machine.
  options.address = "192.0.2.1";
  auto exposer = Exposer::Start(options, &registry);
  EXPECT_TRUE(absl::IsUnavailable(exposer.status())) << exposer.status();
  EXPECT_THAT(exposer.status().message(), HasSubstr("192.0.2.1:0"));
}

}  // namespace
}  // namespace gradwire::metrics
