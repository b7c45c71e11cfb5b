// TuneHeapForTraining: applies glibc's thresholds unless the environment
// already sets them.
#include "common/heap_tuning.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_old_ = true;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_old_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_old_ = false;
};

TEST(HeapTuningTest, RaisesTheThresholdsWhereNothingIsSet) {
  if (!HeapTuningPossible()) {
    const HeapTuning tuning = TuneHeapForTraining();
    EXPECT_FALSE(tuning.applied);
    GTEST_SKIP() << "not glibc's malloc here: " << tuning.description;
  }
  ScopedEnv tunables("GLIBC_TUNABLES", nullptr);
  ScopedEnv mmap("MALLOC_MMAP_THRESHOLD_", nullptr);
  ScopedEnv trim("MALLOC_TRIM_THRESHOLD_", nullptr);
  const HeapTuning tuning = TuneHeapForTraining();
  EXPECT_TRUE(tuning.applied) << tuning.description;
  EXPECT_THAT(tuning.description, HasSubstr("32 MiB"));
  EXPECT_THAT(tuning.description, HasSubstr("512 MiB"));
}

TEST(HeapTuningTest, LeavesThresholdsGivenInTheEnvironmentAlone) {
  if (!HeapTuningPossible()) GTEST_SKIP() << "not glibc's malloc here";
  for (const auto& [name, value] :
       {std::pair<const char*, const char*>{
            "GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576"},
        {"GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536"},
        {"MALLOC_MMAP_THRESHOLD_", "65536"},
        {"MALLOC_TRIM_THRESHOLD_", "65536"}}) {
    ScopedEnv set(name, value);
    const HeapTuning tuning = TuneHeapForTraining();
    EXPECT_FALSE(tuning.applied) << name << "=" << value;
    EXPECT_THAT(tuning.description, HasSubstr("environment"));
  }
}

TEST(HeapTuningTest, OtherTunablesDoNotCount) {
  if (!HeapTuningPossible()) GTEST_SKIP() << "not glibc's malloc here";
  ScopedEnv tunables("GLIBC_TUNABLES", "glibc.pthread.rseq=0");
  ScopedEnv mmap("MALLOC_MMAP_THRESHOLD_", nullptr);
  ScopedEnv trim("MALLOC_TRIM_THRESHOLD_", nullptr);
  EXPECT_TRUE(TuneHeapForTraining().applied);
}

}  // namespace
}  // namespace gradwire
