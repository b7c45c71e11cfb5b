#include "common/metrics/process_metrics.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

double NowSeconds() { return absl::ToUnixMicros(absl::Now()) / 1e6; }

TEST(MetricsProcessMetricsTest, StartTimeIsInThePastAndRecent) {
  const std::optional<double> start = ProcessStartTimeSeconds();
  ASSERT_TRUE(start.has_value());
  EXPECT_LE(*start, NowSeconds() + 1);
  // Test processes are young; allow for a slow machine.
  EXPECT_GT(*start, NowSeconds() - 3600);
}

TEST(MetricsProcessMetricsTest, ResidentMemoryIsPlausible) {
  const std::optional<double> bytes = ResidentMemoryBytes();
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GT(*bytes, 1 << 20);
}

TEST(MetricsProcessMetricsTest, RegistersBuildInfoStartTimeAndMemory) {
  Registry registry;
  auto process = ProcessMetrics::Register(&registry, {"1.2.3", "abc1234"});
  ASSERT_TRUE(process.ok()) << process.status();
  const std::string text = SerializeText(registry.Collect());
  EXPECT_THAT(text, HasSubstr("# TYPE gradwire_build_info gauge\n"
                              "gradwire_build_info{revision=\"abc1234\","
                              "version=\"1.2.3\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_start_time_seconds gauge\n"
                              "process_start_time_seconds 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"
                              "process_resident_memory_bytes "));
  // Registering twice in one registry collides on the callback.
  EXPECT_TRUE(absl::IsAlreadyExists(
      ProcessMetrics::Register(&registry, {"1.2.3", "abc1234"}).status()));
}

TEST(MetricsProcessMetricsTest, CompiledBuildInfoHasVersionAndRevision) {
  const BuildInfo build = CompiledBuildInfo();
  EXPECT_THAT(build.version, MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_FALSE(build.revision.empty());
}

}  // namespace
}  // namespace gradwire::metrics
