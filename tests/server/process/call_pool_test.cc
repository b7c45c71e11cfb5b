#include "server/process/call_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

// More work than threads: at most `threads` run at once, the rest wait in
// the queue, and every piece runs exactly once.
TEST(CallPoolTest, RunsEverythingOnAFixedNumberOfThreads) {
  constexpr int kThreads = 3;
  constexpr int kWork = 40;
  CallPool pool("test", kThreads);
  absl::Notification release;
  absl::BlockingCounter started(kThreads);
  std::atomic<int> done{0};
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  for (int i = 0; i < kWork; ++i) {
    pool.Submit([&, i] {
      {
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      }
      if (i < kThreads) {
        started.DecrementCount();
        release.WaitForNotification();
      }
      done.fetch_add(1);
    });
  }
  started.Wait();
  // Every thread is blocked in the first pieces: the others are queued.
  EXPECT_EQ(pool.running(), kThreads);
  EXPECT_EQ(pool.queued(), kWork - kThreads);
  release.Notify();
  pool.Stop();
  EXPECT_EQ(done.load(), kWork);
  EXPECT_LE(ids.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(pool.queued(), 0);
}

TEST(CallPoolTest, StopRunsWhatIsQueuedAndLaterWorkRunsInline) {
  CallPool pool("test", 1);
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i) pool.Submit([&] { done.fetch_add(1); });
  pool.Stop();
  EXPECT_EQ(done.load(), 10);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  pool.Submit([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
  pool.Stop();  // idempotent
}

// A full queue refuses more work without running it; the running calls do
// not count, and room frees up as the queue drains.
TEST(CallPoolTest, RefusesWorkPastTheQueueBound) {
  CallPool pool("test", 1, /*max_queued=*/2);
  absl::Notification started, release;
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.Submit([&] {
    started.Notify();
    release.WaitForNotification();
    done.fetch_add(1);
  }));
  started.WaitForNotification();
  EXPECT_TRUE(pool.Submit([&] { done.fetch_add(1); }));
  EXPECT_TRUE(pool.Submit([&] { done.fetch_add(1); }));
  bool ran_refused = false;
  EXPECT_FALSE(pool.Submit([&] { ran_refused = true; }));
  EXPECT_EQ(pool.queued(), 2);
  release.Notify();
  pool.Stop();
  EXPECT_EQ(done.load(), 3);
  EXPECT_FALSE(ran_refused);
}

}  // namespace
}  // namespace gradwire
