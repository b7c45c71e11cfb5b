// UsableCpus (common/usable_cpus.h) on fake cgroup trees in a temporary
// directory: cgroup v2 cpu.max, nested v2 cgroups, v1 CFS files, and files
// that are missing or unreadable.
#include "common/usable_cpus.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;

class UsableCpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `text` to `relative` below the fake root.
  void Write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  int Cpus(int affinity, const std::string& cgroup_path = "") {
    return CountUsableCpus(root_.string(), affinity, cgroup_path).cpus;
  }

  fs::path root_;
};

TEST_F(UsableCpusTest, WithoutCgroupFilesTheAffinityMaskCounts) {
  EXPECT_EQ(Cpus(16), 16);
  EXPECT_EQ(Cpus(0), 1);
  EXPECT_EQ(CountUsableCpus(root_.string(), 4).why,
            "affinity mask; no cgroup CPU quota");
}

TEST_F(UsableCpusTest, CgroupV2MaxIsNoLimit) {
  Write("cpu.max", "max 100000\n");
  EXPECT_EQ(Cpus(16), 16);
}

TEST_F(UsableCpusTest, CgroupV2QuotaRoundsUp) {
  Write("cpu.max", "150000 100000\n");
  EXPECT_EQ(Cpus(16), 2);
  const UsableCpuCount count = CountUsableCpus(root_.string(), 16);
  EXPECT_EQ(count.why,
            "cgroup CPU quota 150000/100000 us of 16 in the "
            "affinity mask");
  // A smaller affinity mask wins.
  EXPECT_EQ(Cpus(1), 1);
  // A quota below one CPU still allows one.
  Write("cpu.max", "1000 100000\n");
  EXPECT_EQ(Cpus(16), 1);
}

TEST_F(UsableCpusTest, NestedCgroupV2TakesTheTightestLevel) {
  Write("cpu.max", "max 100000\n");
  Write("kubepods/cpu.max", "300000 100000\n");
  Write("kubepods/pod/cpu.max", "max 100000\n");
  EXPECT_EQ(Cpus(16, "/kubepods/pod"), 3);
  Write("kubepods/pod/cpu.max", "50000 100000\n");
  EXPECT_EQ(Cpus(16, "/kubepods/pod"), 1);
}

TEST_F(UsableCpusTest, CgroupV1CfsQuota) {
  Write("cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(Cpus(16), 3);
  Write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(Cpus(16), 16);
  Write("cpu/cpu.cfs_quota_us", "400000\n");
  Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(Cpus(16), 4);
}

TEST_F(UsableCpusTest, UnreadableFilesMeanNoLimit) {
  Write("cpu.max", "garbage\n");
  EXPECT_EQ(Cpus(8), 8);
  Write("cpu.max", "100000 0\n");
  EXPECT_EQ(Cpus(8), 8);
  Write("cpu.max", "");
  EXPECT_EQ(Cpus(8), 8);
}

TEST(UsableCpusProcessTest, ThisProcessHasAtLeastOne) {
  const UsableCpuCount count = CountUsableCpus();
  EXPECT_GE(count.cpus, 1);
  EXPECT_FALSE(count.why.empty());
  EXPECT_EQ(UsableCpus(), count.cpus);
}

}  // namespace
}  // namespace gradwire
