// The Registry and its metric types, checked through the text a scrape
// produces.
#include "common/metrics/registry.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Scrape(const Registry& registry) {
  return SerializeText(registry.Collect());
}

TEST(MetricsRegistryTest, GoldenTextOfEveryType) {
  Registry registry;
  Family<Counter>* pushes =
      registry.AddCounterFamily({"demo_pushes_total", "Pushes by result."})
          .value();
  pushes->Add({{"result", "accepted"}}).Increment(5);
  pushes->Add({{"result", "stale"}}).Increment();
  Family<Gauge>* workers =
      registry.AddGaugeFamily({"demo_workers", "Workers alive."}).value();
  workers->Add({}).Set(3);
  Family<Histogram>* wait =
      registry
          .AddHistogramFamily({"demo_wait_seconds", "Time waited."},
                              {0.25, 0.5, 1})
          .value();
  Histogram& wait_a = wait->Add({{"shard", "a"}});
  // 0.25 sits on a bound and counts in its bucket (le means <=).
  for (double v : {0.125, 0.25, 0.375, 0.75, 7.0}) wait_a.Observe(v);
  EXPECT_EQ(Scrape(registry),
            "# HELP demo_pushes_total Pushes by result.\n"
            "# TYPE demo_pushes_total counter\n"
            "demo_pushes_total{result=\"accepted\"} 5\n"
            "demo_pushes_total{result=\"stale\"} 1\n"
            "# HELP demo_wait_seconds Time waited.\n"
            "# TYPE demo_wait_seconds histogram\n"
            "demo_wait_seconds_bucket{shard=\"a\",le=\"0.25\"} 2\n"
            "demo_wait_seconds_bucket{shard=\"a\",le=\"0.5\"} 3\n"
            "demo_wait_seconds_bucket{shard=\"a\",le=\"1\"} 4\n"
            "demo_wait_seconds_bucket{shard=\"a\",le=\"+Inf\"} 5\n"
            "demo_wait_seconds_sum{shard=\"a\"} 8.5\n"
            "demo_wait_seconds_count{shard=\"a\"} 5\n"
            "# HELP demo_workers Workers alive.\n"
            "# TYPE demo_workers gauge\n"
            "demo_workers 3\n");
}

TEST(MetricsRegistryTest, LabelValuesAndHelpAreEscapedInTheScrape) {
  Registry registry;
  registry.AddGaugeFamily({"demo_paths", "Paths seen \\ counted\nper line."})
      .value()
      ->Add({{"path", "C:\\tmp\\\"x\"\nend"}})
      .Set(1);
  EXPECT_EQ(Scrape(registry),
            "# HELP demo_paths Paths seen \\\\ counted\\nper line.\n"
            "# TYPE demo_paths gauge\n"
            "demo_paths{path=\"C:\\\\tmp\\\\\\\"x\\\"\\nend\"} 1\n");
}

TEST(MetricsRegistryTest, AddReturnsTheSameChildForTheSameLabels) {
  Registry registry;
  Family<Counter>* family =
      registry.AddCounterFamily({"demo_total", "Demo."}).value();
  Counter& first = family->Add({{"a", "1"}, {"b", "2"}});
  Counter& again = family->Add({{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(&first, &again);
  EXPECT_NE(&first, &family->Add({{"a", "1"}, {"b", "3"}}));
}

TEST(MetricsRegistryTest, CountersOnlyGoUp) {
  Registry registry;
  Counter& counter =
      registry.AddCounterFamily({"demo_total", "Demo."}).value()->Add({});
  counter.Increment();
  counter.Increment(2.5);
  counter.Increment(0);
  EXPECT_EQ(counter.Value(), 3.5);
  // A negative or NaN amount is a bug of the caller: ignored, and debug
  // builds stop at an assert.
  EXPECT_DEBUG_DEATH(counter.Increment(-1), "amount must be >= 0");
  EXPECT_DEBUG_DEATH(counter.Increment(std::nan("")), "amount must be >= 0");
  EXPECT_EQ(counter.Value(), 3.5);
}

TEST(MetricsRegistryTest, GaugesSetIncrementAndDecrement) {
  Registry registry;
  Gauge& gauge =
      registry.AddGaugeFamily({"demo_level", "Demo."}).value()->Add({});
  EXPECT_EQ(gauge.Value(), 0);
  gauge.Set(10);
  gauge.Increment();
  gauge.Increment(4.5);
  gauge.Decrement();
  gauge.Decrement(20);
  EXPECT_EQ(gauge.Value(), -5.5);
  EXPECT_THAT(Scrape(registry), HasSubstr("\ndemo_level -5.5\n"));
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  Histogram& histogram = registry
                             .AddHistogramFamily({"demo_size_bytes", "Demo."},
                                                 ExponentialBuckets(1, 10, 3))
                             .value()
                             ->Add({});
  // A value equal to a bound belongs to that bound's bucket (le).
  for (double v : {1.0, 10.0, 10.5, 100.0, 1000.0, 0.0}) histogram.Observe(v);
  const HistogramSnapshot snapshot = histogram.Snapshot();
  EXPECT_THAT(snapshot.cumulative, ElementsAre(2, 3, 5, 6));
  EXPECT_EQ(snapshot.sum, 1121.5);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("demo_size_bytes_bucket{le=\"1\"} 2\n"
                              "demo_size_bytes_bucket{le=\"10\"} 3\n"
                              "demo_size_bytes_bucket{le=\"100\"} 5\n"
                              "demo_size_bytes_bucket{le=\"+Inf\"} 6\n"
                              "demo_size_bytes_sum 1121.5\n"
                              "demo_size_bytes_count 6\n"));
}

TEST(MetricsRegistryTest, NanObservationsLandInTheInfBucket) {
  Registry registry;
  Histogram& histogram =
      registry.AddHistogramFamily({"demo_seconds", "Demo."}, {1})
          .value()
          ->Add({});
  histogram.Observe(std::nan(""));
  EXPECT_THAT(histogram.Snapshot().cumulative, ElementsAre(0, 1));
  EXPECT_TRUE(std::isnan(histogram.Snapshot().sum));
}

TEST(MetricsRegistryTest, BucketHelpers) {
  EXPECT_THAT(ExponentialBuckets(0.001, 2, 5),
              ElementsAre(0.001, 0.002, 0.004, 0.008, 0.016));
  EXPECT_THAT(LinearBuckets(0.1, 0.1, 4), ElementsAre(0.1, 0.2, 0.3, 0.4));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 3).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 3).empty());
  EXPECT_TRUE(LinearBuckets(0, -1, 3).empty());
  EXPECT_TRUE(LinearBuckets(0, 1, 0).empty());
}

TEST(MetricsRegistryTest, BucketBoundsMustBeFiniteAndStrictlyIncreasing) {
  Registry registry;
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& bounds : std::vector<std::vector<double>>{
           {}, {1, 1}, {2, 1}, {1, inf}, {std::nan("")}}) {
    const auto family =
        registry.AddHistogramFamily({"demo_seconds", "D."}, bounds);
    EXPECT_TRUE(absl::IsInvalidArgument(family.status())) << family.status();
  }
}

TEST(MetricsRegistryTest, NamesAreCheckedAtRegistration) {
  Registry registry;
  const auto error = [&](MetricType type, const std::string& name) {
    switch (type) {
      case MetricType::kCounter:
        return registry.AddCounterFamily({name, "h"}).status();
      case MetricType::kGauge:
        return registry.AddGaugeFamily({name, "h"}).status();
      case MetricType::kHistogram:
        return registry.AddHistogramFamily({name, "h"}, {1}).status();
    }
    return absl::OkStatus();
  };
  EXPECT_THAT(error(MetricType::kCounter, "demo_pushes").message(),
              HasSubstr("must end in _total"));
  EXPECT_THAT(error(MetricType::kGauge, "9lives").message(),
              HasSubstr("[a-zA-Z_][a-zA-Z0-9_]*"));
  EXPECT_THAT(error(MetricType::kGauge, "demo-dash").message(),
              HasSubstr("demo-dash"));
  EXPECT_THAT(error(MetricType::kGauge, "demo:rule").message(),
              HasSubstr("recording rules"));
  EXPECT_THAT(error(MetricType::kGauge, "").message(),
              HasSubstr("metric name"));
  EXPECT_THAT(error(MetricType::kGauge, "demo_count").message(),
              HasSubstr("_count"));
  EXPECT_THAT(error(MetricType::kHistogram, "demo_bucket").message(),
              HasSubstr("_bucket"));
  EXPECT_THAT(error(MetricType::kGauge, "demo_sum").message(),
              HasSubstr("_sum"));
  EXPECT_TRUE(absl::IsInvalidArgument(
      registry.AddGaugeFamily({"demo_ok", "bad \xff utf-8"}).status()));
  EXPECT_TRUE(error(MetricType::kGauge, "_demo_ok1").ok());
}

TEST(MetricsRegistryTest, LabelNamesAreChecked) {
  Registry registry;
  Family<Gauge>* gauges = registry.AddGaugeFamily({"demo", "h"}).value();
  EXPECT_THAT(gauges->TryAdd({{"__reserved", "x"}}).status().message(),
              HasSubstr("reserved"));
  EXPECT_THAT(gauges->TryAdd({{"has-dash", "x"}}).status().message(),
              HasSubstr("label name"));
  EXPECT_THAT(gauges->TryAdd({{"1st", "x"}}).status().message(),
              HasSubstr("label name"));
  EXPECT_THAT(gauges->TryAdd({{"ok", "\xc0\xaf"}}).status().message(),
              HasSubstr("UTF-8"));
  // The first child fixes the label names of the family.
  ASSERT_TRUE(gauges->TryAdd({{"shard", "0"}}).ok());
  EXPECT_THAT(gauges->TryAdd({{"worker", "0"}}).status().message(),
              HasSubstr("differ"));
  Family<Histogram>* histograms =
      registry.AddHistogramFamily({"demo_seconds", "h"}, {1}).value();
  EXPECT_THAT(histograms->TryAdd({{"le", "1"}}).status().message(),
              HasSubstr("reserved"));
  EXPECT_DEATH(gauges->Add({{"__x", "y"}}), "demo: label name \"__x\"");
}

TEST(MetricsRegistryTest, DuplicateFamiliesMustBeIdentical) {
  Registry registry;
  Family<Counter>* first =
      registry.AddCounterFamily({"demo_total", "Help."}).value();
  EXPECT_EQ(registry.AddCounterFamily({"demo_total", "Help."}).value(), first);
  EXPECT_THAT(registry.AddCounterFamily({"demo_total", "Other."}).status(),
              ::testing::Property(&absl::Status::code,
                                  absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(absl::IsAlreadyExists(
      registry.AddGaugeFamily({"demo_total", "Help."}).status()));
  ASSERT_TRUE(registry.AddHistogramFamily({"demo_seconds", "H."}, {1}).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(
      registry.AddHistogramFamily({"demo_seconds", "H."}, {2}).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(registry
                                        .AddCallback(MetricType::kGauge,
                                                     {"demo_seconds", "H."},
                                                     [](CallbackSink&) {})
                                        .status()));
}

TEST(MetricsRegistryTest, CallbacksRunAtEachCollectUntilUnregistered) {
  Registry registry;
  int calls = 0;
  auto registration = registry.AddCallback(
      MetricType::kGauge, {"demo_chunk_version", "Newest version."},
      [&calls](CallbackSink& sink) {
        ++calls;
        sink.Add({{"chunk", "min"}}, 10 * calls);
        sink.Add({{"chunk", "max"}}, 10 * calls + 1);
      });
  ASSERT_TRUE(registration.ok()) << registration.status();
  EXPECT_EQ(Scrape(registry),
            "# HELP demo_chunk_version Newest version.\n"
            "# TYPE demo_chunk_version gauge\n"
            "demo_chunk_version{chunk=\"min\"} 10\n"
            "demo_chunk_version{chunk=\"max\"} 11\n");
  EXPECT_THAT(Scrape(registry), HasSubstr("{chunk=\"max\"} 21\n"));
  // A callback name is never shared.
  EXPECT_TRUE(absl::IsAlreadyExists(
      registry
          .AddCallback(MetricType::kGauge, {"demo_chunk_version", "N."},
                       [](CallbackSink&) {})
          .status()));
  registration->reset();
  EXPECT_EQ(Scrape(registry), "");
  EXPECT_EQ(calls, 2);
  // The name is free again.
  EXPECT_TRUE(registry.AddGaugeFamily({"demo_chunk_version", "N."}).ok());
}

TEST(MetricsRegistryTest, CallbackCountersFollowCounterRules) {
  Registry registry;
  EXPECT_TRUE(absl::IsInvalidArgument(registry
                                          .AddCallback(MetricType::kCounter,
                                                       {"demo_updates", "U."},
                                                       [](CallbackSink&) {})
                                          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(registry
                                          .AddCallback(MetricType::kHistogram,
                                                       {"demo_h", "U."},
                                                       [](CallbackSink&) {})
                                          .status()));
  auto counter =
      registry.AddCallback(MetricType::kCounter, {"demo_updates_total", "U."},
                           [](CallbackSink& sink) { sink.Add({}, 42); });
  ASSERT_TRUE(counter.ok());
  EXPECT_EQ(Scrape(registry),
            "# HELP demo_updates_total U.\n"
            "# TYPE demo_updates_total counter\n"
            "demo_updates_total 42\n");
}

// N threads hammer the same children while another thread scrapes: the
// totals are exact (every increment is an integer, exact in a double).
TEST(MetricsRegistryTest, ConcurrentUpdatesGiveExactTotals) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  Registry registry;
  Counter& counter =
      registry.AddCounterFamily({"demo_total", "D."}).value()->Add({});
  Gauge& gauge = registry.AddGaugeFamily({"demo_level", "D."}).value()->Add({});
  Histogram& histogram =
      registry.AddHistogramFamily({"demo_seconds", "D."}, {0.5, 1.5})
          .value()
          ->Add({});
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) Scrape(registry);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.Increment();
        gauge.Increment(2);
        gauge.Decrement();
        histogram.Observe(t % 2);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  scraper.join();
  EXPECT_EQ(counter.Value(), kThreads * kPerThread);
  EXPECT_EQ(gauge.Value(), kThreads * kPerThread);
  const HistogramSnapshot snapshot = histogram.Snapshot();
  EXPECT_THAT(snapshot.cumulative,
              ElementsAre(kThreads / 2 * kPerThread, kThreads * kPerThread,
                          kThreads * kPerThread));
  EXPECT_EQ(snapshot.sum, kThreads / 2 * kPerThread);
}

}  // namespace
}  // namespace gradwire::metrics
