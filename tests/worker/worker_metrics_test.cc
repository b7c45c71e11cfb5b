#include "worker/worker_metrics.h"

#include <string>

#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

std::string Scrape(const metrics::Registry& registry) {
  return metrics::SerializeText(registry.Collect());
}

TEST(WorkerMetricsTest, ByteCountersFollowTheClientsTotals) {
  metrics::Registry registry;
  auto m = WorkerMetrics::Create(&registry, "0", "topk");
  ASSERT_TRUE(m.ok()) << m.status();
  TrafficStats traffic;
  traffic.init_bytes_sent = 1000;
  traffic.push_bytes_sent = 300;
  traffic.pull_bytes_received = 4000;
  (*m)->RecordTraffic(traffic);
  traffic.push_bytes_sent = 700;
  traffic.pull_bytes_sent = 20;
  traffic.retries = 2;
  (*m)->RecordTraffic(traffic);
  // The same totals again add nothing.
  (*m)->RecordTraffic(traffic);
  EXPECT_EQ((*m)->SentBytes("init"), 1000u);
  EXPECT_EQ((*m)->SentBytes("push"), 700u);
  EXPECT_EQ((*m)->SentBytes("pull"), 20u);
  EXPECT_EQ((*m)->ReceivedBytes("pull"), 4000u);
  EXPECT_EQ((*m)->ReceivedBytes("push"), 0u);
  EXPECT_EQ((*m)->SentBytes("bogus"), 0u);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text,
              HasSubstr("gradwire_worker_sent_bytes_total{compressor=\"topk\","
                        "rpc=\"push\",worker=\"0\"} 700\n"));
  EXPECT_THAT(text, HasSubstr("gradwire_worker_rpc_retries_total{compressor="
                              "\"topk\",worker=\"0\"} 2\n"));
}

TEST(WorkerMetricsTest, StepsTimingsAndTrainingGauges) {
  metrics::Registry registry;
  auto m = WorkerMetrics::Create(&registry, "1.0", "qsgd");
  ASSERT_TRUE(m.ok()) << m.status();
  StepTimings timings;
  timings.step = 0.25;
  timings.push = 0.1;
  timings.pull = 0.05;
  (*m)->RecordStep(timings, /*residual_norm=*/3.5);
  (*m)->RecordStep(timings, /*residual_norm=*/2.5);
  (*m)->AddDenseEquivalentBytes(4096);
  (*m)->SetLoss(0.75);
  (*m)->SetSamplesPerSecond(1200);
  (*m)->SetEpoch(3);
  (*m)->SetCompressionStateBytes(12582912);
  EXPECT_EQ((*m)->DenseEquivalentBytes(), 4096u);
  const std::string text = Scrape(registry);
  const std::string labels = "{compressor=\"qsgd\",worker=\"1.0\"}";
  EXPECT_THAT(text, HasSubstr("gradwire_worker_steps_total" + labels + " 2\n"));
  EXPECT_THAT(
      text, HasSubstr("gradwire_worker_step_seconds_count" + labels + " 2\n"));
  EXPECT_THAT(
      text, HasSubstr("gradwire_worker_step_seconds_sum" + labels + " 0.5\n"));
  EXPECT_THAT(text,
              HasSubstr("gradwire_worker_residual_norm" + labels + " 2.5\n"));
  EXPECT_THAT(text, HasSubstr("gradwire_worker_loss" + labels + " 0.75\n"));
  EXPECT_THAT(text, HasSubstr("gradwire_worker_epoch" + labels + " 3\n"));
  EXPECT_THAT(text, HasSubstr("gradwire_worker_compression_state_bytes" +
                              labels + " 12582912\n"));
}

TEST(WorkerMetricsTest, TwoWorkersShareOneRegistry) {
  metrics::Registry registry;
  auto a = WorkerMetrics::Create(&registry, "0", "topk");
  auto b = WorkerMetrics::Create(&registry, "1", "topk");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  (*a)->AddDenseEquivalentBytes(10);
  (*b)->AddDenseEquivalentBytes(20);
  EXPECT_EQ((*a)->DenseEquivalentBytes(), 10u);
  EXPECT_EQ((*b)->DenseEquivalentBytes(), 20u);
}

TEST(WorkerMetricsTest, ANameTakenWithOtherHelpIsAnError) {
  metrics::Registry registry;
  ASSERT_TRUE(
      registry.AddCounterFamily({"gradwire_worker_steps_total", "other"}).ok());
  auto refused = WorkerMetrics::Create(&registry, "0", "topk");
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists)
      << refused.status();
}

}  // namespace
}  // namespace gradwire
