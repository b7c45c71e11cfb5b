#include "common/compress/task_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(TaskPoolTest, RunsEveryTaskOnceAtEverySize) {
  for (int threads : {1, 2, 5}) {
    TaskPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (size_t count : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> runs(count);
      pool.Run(count, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(runs[i].load(), 1) << threads << " threads, task " << i;
      }
    }
  }
}

TEST(TaskPoolTest, UsesMoreThanTheCallingThread) {
  TaskPool pool(3);
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  // Each task waits until a second thread has joined in (or all tasks ran
  // on one thread, which the assertion below then reports).
  std::atomic<int> started{0};
  pool.Run(3, [&](size_t) {
    {
      absl::MutexLock lock(&mu);
      ids.insert(std::this_thread::get_id());
    }
    started.fetch_add(1);
    for (int spin = 0; spin < 2000 && started.load() < 2; ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(TaskPoolTest, BatchesFromSeveralThreadsAreSerialised) {
  TaskPool pool(2);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        pool.Run(8, [&](size_t) { total.fetch_add(1); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 8);
}

TEST(TaskPoolTest, CoresOfThisProcessIsPositive) {
  EXPECT_GE(CoresOfThisProcess(), 1);
  EXPECT_LE(
      CoresOfThisProcess(),
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace gradwire
