// What the /metrics endpoint serves passes `promtool check metrics`, the
// linter of the Prometheus project: every metric type, escaped labels and
// help, histograms, callbacks and the process metrics.
#include <limits>
#include <memory>
#include <string>

#include "common/metrics/exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"

namespace gradwire::metrics {
namespace {

using ::gradwire::metrics_test::HttpRequest;
using ::gradwire::metrics_test::PromtoolCheckMetrics;
using ::testing::HasSubstr;

// Registers one family of each kind, with values that exercise the format.
void FillRegistry(Registry* registry) {
  Family<Counter>* requests =
      registry
          ->AddCounterFamily({"gradwire_demo_requests_total",
                              "Requests by path, \"quoted\" and \\ escaped."})
          .value();
  requests->Add({{"path", "/a\"b\\c\nd"}}).Increment(3);
  requests->Add({{"path", "/"}}).Increment(1e15);
  Family<Gauge>* level =
      registry->AddGaugeFamily({"gradwire_demo_level", "A level.\nTwo lines."})
          .value();
  level->Add({{"kind", "negative"}}).Set(-2.5);
  level->Add({{"kind", "infinite"}})
      .Set(std::numeric_limits<double>::infinity());
  level->Add({{"kind", "nan"}}).Set(std::numeric_limits<double>::quiet_NaN());
  level->Add({{"kind", "tiny"}}).Set(1e-300);
  Family<Histogram>* latency =
      registry
          ->AddHistogramFamily({"gradwire_demo_latency_seconds", "Latency."},
                               ExponentialBuckets(0.001, 4, 8))
          .value();
  for (double v : {0.0005, 0.003, 0.2, 9.0, 1e6}) {
    latency->Add({{"rpc", "push"}}).Observe(v);
  }
  latency->Add({{"rpc", "pull"}});
}

TEST(MetricsPromtoolTest, ServedTextPassesPromtoolCheckMetrics) {
  Registry registry;
  FillRegistry(&registry);
  auto process = ProcessMetrics::Register(&registry);
  ASSERT_TRUE(process.ok()) << process.status();
  auto callback = registry.AddCallback(
      MetricType::kGauge, {"gradwire_demo_chunk_version", "Versions."},
      [](CallbackSink& sink) {
        sink.Add({{"bound", "min"}}, 3);
        sink.Add({{"bound", "max"}}, 9);
      });
  ASSERT_TRUE(callback.ok()) << callback.status();
  ExposerOptions options;
  options.address = "127.0.0.1";
  auto exposer = Exposer::Start(options, &registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();

  auto response = HttpRequest((*exposer)->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->status, 200);
  EXPECT_THAT(response->body,
              HasSubstr("gradwire_demo_latency_seconds_bucket{rpc=\"pull\","
                        "le=\"+Inf\"} 0\n"));
  auto check = PromtoolCheckMetrics(response->body);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << response->body;
  EXPECT_EQ(check->output, "") << response->body;
}

// The check itself works: promtool flags what breaks its rules.
TEST(MetricsPromtoolTest, PromtoolFlagsProblems) {
  auto check = PromtoolCheckMetrics(
      "# HELP demo_requests Requests.\n# TYPE demo_requests counter\n"
      "demo_requests 1\n");
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_NE(check->exit_code, 0);
  EXPECT_THAT(check->output, HasSubstr("_total"));
}

}  // namespace
}  // namespace gradwire::metrics
