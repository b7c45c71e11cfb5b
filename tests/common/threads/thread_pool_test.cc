// ThreadPool in each of its uses: a shard's call pool (fixed threads, a
// bounded queue, drained on Stop), a worker's compression (ParallelFor with
// the caller working too) and a client's calls to its shards (ParallelFor
// on a pool that grows, where a blocked task holds up no other call).
#include "common/threads/thread_pool.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

ThreadPoolOptions Fixed(int threads, int64_t max_queued = 1 << 30) {
  ThreadPoolOptions options;
  options.threads = threads;
  options.max_queued = max_queued;
  return options;
}

ThreadPoolOptions Growing() {
  ThreadPoolOptions options;
  options.threads = 0;
  options.grow_when_busy = true;
  return options;
}

// More work than threads: at most `threads` run at once, the rest wait in
// the queue, and every piece runs exactly once.
TEST(ThreadPoolTest, SubmitRunsEverythingOnAFixedNumberOfThreads) {
  constexpr int kThreads = 3;
  constexpr int kWork = 40;
  ThreadPool pool(Fixed(kThreads));
  EXPECT_EQ(pool.threads(), kThreads);
  absl::Notification release;
  absl::BlockingCounter started(kThreads);
  std::atomic<int> done{0};
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  for (int i = 0; i < kWork; ++i) {
    ASSERT_TRUE(pool.Submit([&, i] {
      {
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      }
      if (i < kThreads) {
        started.DecrementCount();
        release.WaitForNotification();
      }
      done.fetch_add(1);
    }));
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
  EXPECT_EQ(pool.running(), 0);
}

TEST(ThreadPoolTest, StopRunsWhatIsQueuedAndLaterWorkRunsInline) {
  ThreadPool pool(Fixed(1));
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i) pool.Submit([&] { done.fetch_add(1); });
  pool.Stop();
  EXPECT_EQ(done.load(), 10);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  EXPECT_TRUE(pool.Submit([&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, caller);
  std::atomic<int> ran{0};
  pool.ParallelFor(4, [&](size_t) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 4);
  pool.Stop();  // idempotent
}

// A full queue refuses more work without running it; the running pieces do
// not count, and room frees up as the queue drains.
TEST(ThreadPoolTest, RefusesWorkPastTheQueueBound) {
  ThreadPool pool(Fixed(1, /*max_queued=*/2));
  EXPECT_EQ(pool.max_queued(), 2);
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

// A pool without threads has no one to queue work for: it runs in the
// caller.
TEST(ThreadPoolTest, WithoutThreadsWorkRunsInTheCaller) {
  ThreadPool pool(Fixed(0));
  std::thread::id ran_on;
  EXPECT_TRUE(pool.Submit([&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(pool.threads(), 0);
}

TEST(ThreadPoolTest, ParallelForRunsEveryTaskOnceAtEverySize) {
  for (int threads : {0, 1, 4}) {
    ThreadPool pool(Fixed(threads));
    for (size_t count : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> runs(count);
      std::thread::id first_thread;
      pool.ParallelFor(count, [&](size_t i) {
        runs[i].fetch_add(1);
        if (i == 0) first_thread = std::this_thread::get_id();
      });
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(runs[i].load(), 1) << threads << " threads, task " << i;
      }
      if (count > 0) {
        EXPECT_EQ(first_thread, std::this_thread::get_id());
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForUsesMoreThanTheCallingThread) {
  ThreadPool pool(Fixed(2));
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  // Each task waits until a second thread has joined in (or all tasks ran
  // on one thread, which the assertion below then reports).
  std::atomic<int> started{0};
  pool.ParallelFor(3, [&](size_t) {
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

TEST(ThreadPoolTest, ParallelForFromSeveralThreadsRunsEveryTask) {
  for (const ThreadPoolOptions& options : {Fixed(2), Growing()}) {
    ThreadPool pool(options);
    std::atomic<int> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&] {
        for (int round = 0; round < 200; ++round) {
          pool.ParallelFor(4, [&](size_t) { total.fetch_add(1); });
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(total.load(), 4 * 200 * 4);
  }
}

// With a full queue the caller does the tasks no helper could take.
TEST(ThreadPoolTest, ParallelForOnAFullQueueRunsInTheCaller) {
  ThreadPool pool(Fixed(1, /*max_queued=*/1));
  absl::Notification started, release;
  pool.Submit([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();
  pool.Submit([] {});  // The queue is full now.
  std::atomic<int> ran{0};
  pool.ParallelFor(5, [&](size_t) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 5);
  release.Notify();
}

// A task may itself call ParallelFor on its pool: the inner caller does
// not wait for helpers that never started.
TEST(ThreadPoolTest, NestedParallelForReturns) {
  ThreadPool pool(Fixed(1));
  std::atomic<int> ran{0};
  pool.ParallelFor(4, [&](size_t) {
    pool.ParallelFor(4, [&](size_t) { ran.fetch_add(1); });
  });
  EXPECT_EQ(ran.load(), 16);
}

TEST(ThreadPoolTest, OneTaskStartsNoThread) {
  ThreadPool pool(Growing());
  int ran = 0;
  pool.ParallelFor(1, [&](size_t) { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(pool.threads(), 0);
}

TEST(ThreadPoolTest, AGrowingPoolKeepsItsThreadsAcrossCalls) {
  ThreadPool pool(Growing());
  std::atomic<int> ran{0};
  for (int call = 0; call < 50; ++call) {
    pool.ParallelFor(3, [&](size_t) { ++ran; });
  }
  EXPECT_EQ(ran.load(), 150);
  // Two helpers a call leave the caller. A thread still on its way back
  // from its last task can make a call start another (on a loaded machine
  // a few dozen times: 36 seen with 4 busy processes on 2 cores), but the
  // 100 helpers queued do not start a thread each.
  EXPECT_GE(pool.threads(), 1);
  EXPECT_LT(pool.threads(), 100);
}

// A task that blocks (a Pull waiting for its step) does not hold up
// another call on a growing pool: that call gets threads of its own.
TEST(ThreadPoolTest, ABlockedTaskDoesNotHoldUpAnotherCall) {
  ThreadPool pool(Growing());
  absl::Notification release;
  absl::Notification blocked;
  std::thread waiting_call([&] {
    pool.ParallelFor(2, [&](size_t i) {
      if (i == 1) {
        blocked.Notify();
        release.WaitForNotification();
      }
    });
  });
  blocked.WaitForNotification();
  // Every task waits until all three run at once: each on its own thread.
  std::atomic<int> arrived{0};
  pool.ParallelFor(3, [&](size_t) {
    arrived.fetch_add(1);
    for (int spin = 0; spin < 5000 && arrived.load() < 3; ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(arrived.load(), 3);
  EXPECT_FALSE(release.HasBeenNotified());
  release.Notify();
  waiting_call.join();
}

}  // namespace
}  // namespace gradwire
