#include "common/compress/auto/link_estimator.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(LinkEstimatorTest, NothingBeforeTheFirstTransfer) {
  LinkEstimator link;
  EXPECT_FALSE(link.Current().has_value());
  link.Observe(0, 1.0);
  link.Observe(100, 0.0);
  EXPECT_FALSE(link.Current().has_value());
}

TEST(LinkEstimatorTest, RecoversRateAndLatency) {
  LinkEstimator link;
  const double rate = 12.5e6;  // 100 Mbit/s.
  const double latency = 0.002;
  for (int i = 0; i < 40; ++i) {
    const uint64_t bytes = (i % 4 == 0) ? 200 : 100000 + 50000 * (i % 3);
    link.Observe(bytes, latency + bytes / rate);
  }
  const auto estimate = link.Current();
  ASSERT_TRUE(estimate.has_value());
  EXPECT_NEAR(estimate->bytes_per_second, rate, rate * 0.05);
  EXPECT_NEAR(estimate->latency_seconds, latency, latency * 0.1);
}

TEST(LinkEstimatorTest, WaitingDoesNotLowerTheRate) {
  LinkEstimator link;
  const double rate = 125e6;
  for (int i = 0; i < 40; ++i) {
    const uint64_t bytes = 1 << 20;
    // Every other transfer waited 50 ms for another worker (a BSP pull).
    const double waited = (i % 2) ? 0.05 : 0.0;
    link.Observe(bytes, 0.001 + bytes / rate + waited);
  }
  EXPECT_GT(link.Current()->bytes_per_second, rate * 0.5);
}

TEST(LinkEstimatorTest, FollowsASlowerLink) {
  LinkEstimator link;
  for (int i = 0; i < 40; ++i) link.Observe(1 << 20, (1 << 20) / 125e6);
  for (int i = 0; i < 60; ++i) link.Observe(1 << 20, (1 << 20) / 1.25e6);
  EXPECT_LT(link.Current()->bytes_per_second, 2.5e6);
}

}  // namespace
}  // namespace gradwire
