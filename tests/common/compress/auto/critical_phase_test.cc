#include "common/compress/auto/critical_phase.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

CriticalPhaseOptions Options() {
  CriticalPhaseOptions options;
  options.warmup_steps = 5;
  options.interval = 4;
  options.threshold = 0.5;
  return options;
}

TEST(CriticalPhaseTest, FirstStepsAreCritical) {
  CriticalPhaseDetector detector(Options());
  EXPECT_TRUE(detector.Observe(0, 1.0, 0.1));
  EXPECT_TRUE(detector.Observe(3, 1.0, 0.1));
  EXPECT_FALSE(detector.Observe(4, 1.0, 0.1));
}

TEST(CriticalPhaseTest, SteadyNormIsNotCritical) {
  CriticalPhaseDetector detector(Options());
  bool any = false;
  for (uint64_t s = 0; s < 100; ++s) {
    const bool critical = detector.Observe(s, 1.0 + 0.1 * (s % 3), 0.1);
    if (s >= 5) any |= critical;
  }
  EXPECT_FALSE(any);
}

TEST(CriticalPhaseTest, SharpNormChangeIsCriticalForAnInterval) {
  CriticalPhaseDetector detector(Options());
  uint64_t s = 0;
  for (; s < 40; ++s) detector.Observe(s, 1.0, 0.1);
  EXPECT_FALSE(detector.critical());
  // The norm triples: noticed when the interval closes.
  bool seen = false;
  for (int i = 0; i < 4; ++i, ++s) seen |= detector.Observe(s, 3.0, 0.1);
  EXPECT_TRUE(seen);
  // And it passes once the norm stays at its new level.
  for (int i = 0; i < 12; ++i, ++s) detector.Observe(s, 3.0, 0.1);
  EXPECT_FALSE(detector.critical());
}

TEST(CriticalPhaseTest, LearningRateDropIsCritical) {
  CriticalPhaseDetector detector(Options());
  uint64_t s = 0;
  for (; s < 20; ++s) detector.Observe(s, 1.0, 0.1);
  EXPECT_FALSE(detector.critical());
  EXPECT_TRUE(detector.Observe(s++, 1.0, 0.01));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(detector.Observe(s++, 1.0, 0.01));
  for (int i = 0; i < 4; ++i) detector.Observe(s++, 1.0, 0.01);
  EXPECT_FALSE(detector.critical());
}

}  // namespace
}  // namespace gradwire
