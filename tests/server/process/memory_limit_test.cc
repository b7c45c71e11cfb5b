// DetectMemoryLimitBytes and the cgroup files' text (memory_limit.h).
#include "server/process/memory_limit.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(MemoryLimitTest, ReadsALimitAndTreatsUnlimitedAsNone) {
  EXPECT_EQ(ParseCgroupMemoryLimit("4294967296\n"), uint64_t{4} << 30);
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), 0u);
  // cgroup v1's "no limit".
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712\n"), 0u);
  EXPECT_EQ(ParseCgroupMemoryLimit(""), 0u);
  EXPECT_EQ(ParseCgroupMemoryLimit("12k"), 0u);
}

TEST(MemoryLimitTest, TheDetectedLimitIsAtMostThePhysicalMemory) {
  const uint64_t limit = DetectMemoryLimitBytes();
  // Any machine that runs the tests has some memory and less than 2^50.
  EXPECT_GT(limit, uint64_t{64} << 20);
  EXPECT_LT(limit, uint64_t{1} << 50);
}

}  // namespace
}  // namespace gradwire
