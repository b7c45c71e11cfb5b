// The /metrics endpoint over real sockets.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/metrics/exposer.h"
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
