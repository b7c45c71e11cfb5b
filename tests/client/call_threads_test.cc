// CallThreads: every task runs once, the first in the caller; threads are
// kept and reused across calls; a task that blocks does not hold up another
// call, which starts a thread of its own instead.
#include "client/call_threads.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(CallThreadsTest, RunsEveryTaskOnceAndTheFirstInTheCaller) {
  CallThreads threads;
  std::vector<std::atomic<int>> runs(5);
  std::thread::id first_thread;
  threads.Run(5, [&](size_t i) {
    ++runs[i];
    if (i == 0) first_thread = std::this_thread::get_id();
  });
  for (const std::atomic<int>& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_EQ(first_thread, std::this_thread::get_id());
  threads.Run(0, [&](size_t) { ADD_FAILURE() << "no task to run"; });
}

TEST(CallThreadsTest, OneTaskStartsNoThread) {
  CallThreads threads;
  int ran = 0;
  threads.Run(1, [&](size_t) { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(threads.threads_started(), 0u);
}

TEST(CallThreadsTest, KeepsItsThreadsAcrossCalls) {
  CallThreads threads;
  std::atomic<int> ran{0};
  for (int call = 0; call < 50; ++call) {
    threads.Run(3, [&](size_t) { ++ran; });
  }
  EXPECT_EQ(ran.load(), 150);
  // Two tasks a call leave the caller. A thread still on its way back from
  // its last task can make a call start another, but the 100 tasks handed
  // out do not start a thread each.
  EXPECT_GE(threads.threads_started(), 1u);
  EXPECT_LT(threads.threads_started(), 20u);
}

TEST(CallThreadsTest, ABlockedTaskDoesNotHoldUpAnotherCall) {
  CallThreads threads;
  absl::Notification release;
  absl::Notification blocked;
  std::thread waiting_call([&] {
    threads.Run(2, [&](size_t i) {
      if (i == 1) {
        blocked.Notify();
        release.WaitForNotification();
      }
    });
  });
  blocked.WaitForNotification();
  std::atomic<int> ran{0};
  threads.Run(3, [&](size_t) { ++ran; });  // Returns while task 1 waits.
  EXPECT_EQ(ran.load(), 3);
  EXPECT_FALSE(release.HasBeenNotified());
  release.Notify();
  waiting_call.join();
}

TEST(CallThreadsTest, ConcurrentCallersEachGetAllTheirTasksRun) {
  CallThreads threads;
  std::atomic<int> ran{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int call = 0; call < 200; ++call) {
        threads.Run(4, [&](size_t) { ++ran; });
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(ran.load(), 4 * 200 * 4);
}

}  // namespace
}  // namespace gradwire
