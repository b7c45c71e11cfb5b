// ChunkPipeline: jobs run in order on one thread, batches form while a job
// runs or until they reach the minimum batch, Await waits for given keys
// only, Drain waits for all and reports the first error.
#include "worker/chunk_pipeline.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;

TEST(ChunkPipelineTest, RunsEveryKeyInOrderAndDrainWaits) {
  std::vector<uint64_t> seen;  // Read only after Drain.
  ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
    seen.insert(seen.end(), keys.begin(), keys.end());
    return absl::OkStatus();
  });
  const uint64_t first[] = {3, 1};
  const uint64_t second[] = {7};
  pipeline.Enqueue(first);
  pipeline.Enqueue(second);
  EXPECT_TRUE(pipeline.Drain().ok());
  EXPECT_THAT(seen, ElementsAre(3, 1, 7));
}

TEST(ChunkPipelineTest, BatchesWhatQueuedWhileAJobRan) {
  absl::Notification started;
  absl::Notification release;
  std::vector<std::vector<uint64_t>> calls;  // Read only after Drain.
  ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
    calls.push_back(keys);
    if (calls.size() == 1) {
      started.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  });
  const uint64_t a[] = {1}, b[] = {2}, c[] = {3};
  pipeline.Enqueue(a);
  // Wait until the first job is running, so that b and c queue behind it.
  started.WaitForNotification();
  pipeline.Enqueue(b);
  pipeline.Enqueue(c);
  release.Notify();
  EXPECT_TRUE(pipeline.Drain().ok());
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_THAT(calls[1], ElementsAre(2, 3));
}

TEST(ChunkPipelineTest, ReportsTheFirstErrorOnceAndDropsLaterKeys) {
  std::atomic<int> jobs{0};
  absl::Notification release;
  ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
    ++jobs;
    if (keys[0] == 1) {
      release.WaitForNotification();
      return absl::UnavailableError("shard 0 is down");
    }
    return absl::OkStatus();
  });
  const uint64_t a[] = {1}, b[] = {2};
  pipeline.Enqueue(a);
  while (jobs.load() == 0) absl::SleepFor(absl::Milliseconds(1));
  pipeline.Enqueue(b);
  release.Notify();
  const absl::Status drained = pipeline.Drain();
  EXPECT_EQ(drained.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(jobs.load(), 1);  // Key 2 was dropped: the step had failed.
  EXPECT_TRUE(pipeline.Drain().ok());
  pipeline.Enqueue(b);
  EXPECT_TRUE(pipeline.Drain().ok());
  EXPECT_EQ(jobs.load(), 2);
}

TEST(ChunkPipelineTest, DestructionFinishesQueuedWork) {
  std::atomic<int> handled{0};
  {
    ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
      handled += keys.size();
      return absl::OkStatus();
    });
    const uint64_t keys[] = {1, 2, 3};
    pipeline.Enqueue(keys);
  }
  EXPECT_EQ(handled.load(), 3);
}

TEST(ChunkPipelineTest, AwaitWaitsForItsKeysOnly) {
  absl::Notification release;
  ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
    if (keys[0] == 2) release.WaitForNotification();
    return absl::OkStatus();
  });
  const uint64_t one[] = {1}, two[] = {2}, five[] = {5};
  pipeline.Enqueue(one);
  EXPECT_TRUE(pipeline.Await(one).ok());
  pipeline.Enqueue(two);
  EXPECT_TRUE(pipeline.Await(five).ok());  // Never enqueued: no wait.
  EXPECT_TRUE(pipeline.Await(one).ok());   // Handled already.
  std::atomic<bool> awaited{false};
  std::thread waiter([&] {
    EXPECT_TRUE(pipeline.Await(two).ok());
    awaited = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(awaited.load());  // Key 2's job is still blocked.
  release.Notify();
  waiter.join();
  EXPECT_TRUE(awaited.load());
  EXPECT_TRUE(pipeline.Drain().ok());
}

TEST(ChunkPipelineTest, AwaitReturnsAFailedJobsErrorUntilDrained) {
  absl::Notification release;
  ChunkPipeline pipeline([&](const std::vector<uint64_t>& keys) {
    if (keys[0] == 1) {
      release.WaitForNotification();
      return absl::UnavailableError("shard 0 is down");
    }
    return absl::OkStatus();
  });
  const uint64_t one[] = {1}, two[] = {2};
  pipeline.Enqueue(one);
  pipeline.Enqueue(two);
  release.Notify();
  // Key 2 is dropped, not handled; waiting for it ends with the error.
  EXPECT_EQ(pipeline.Await(two).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pipeline.Await(one).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pipeline.Drain().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(pipeline.Await(two).ok());
  pipeline.Enqueue(two);
  EXPECT_TRUE(pipeline.Await(two).ok());
  EXPECT_TRUE(pipeline.Drain().ok());
}

// Records each job's keys under a lock, for tests that look while the
// pipeline runs.
class JobLog {
 public:
  ChunkPipeline::Job Job() {
    return [this](const std::vector<uint64_t>& keys) {
      absl::MutexLock lock(&mu_);
      calls_.push_back(keys);
      return absl::OkStatus();
    };
  }
  std::vector<std::vector<uint64_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<uint64_t>> calls_ ABSL_GUARDED_BY(mu_);
};

TEST(ChunkPipelineTest, HoldsKeysUntilTheyFillTheMinimumBatch) {
  JobLog log;
  ChunkPipeline pipeline(log.Job(), /*min_batch_bytes=*/1000);
  const uint64_t small[] = {9}, more[] = {8}, large[] = {4, 5};
  pipeline.Enqueue(small, 400);
  pipeline.Enqueue(more, 599);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(log.calls().empty());  // 999 bytes: not a batch yet.
  pipeline.Enqueue(large, 1);
  EXPECT_TRUE(pipeline.Drain().ok());
  EXPECT_THAT(log.calls(), ElementsAre(ElementsAre(9, 8, 4, 5)));
  // The count starts again after a batch.
  pipeline.Enqueue(small, 600);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(log.calls().size(), 1u);
  pipeline.Enqueue(more, 400);
  // Full without a waiter: the thread takes it by itself.
  for (int i = 0; i < 5000 && log.calls().size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_THAT(log.calls(),
              ElementsAre(ElementsAre(9, 8, 4, 5), ElementsAre(9, 8)));
}

TEST(ChunkPipelineTest, DrainAwaitAndDestructionSendAPartialBatch) {
  JobLog log;
  {
    ChunkPipeline pipeline(log.Job(), /*min_batch_bytes=*/1 << 30);
    const uint64_t one[] = {1}, two[] = {2}, three[] = {3};
    pipeline.Enqueue(one, 10);
    EXPECT_TRUE(pipeline.Drain().ok());
    pipeline.Enqueue(two, 10);
    EXPECT_TRUE(pipeline.Await(two).ok());
    EXPECT_TRUE(pipeline.Await(three).ok());  // Never enqueued: no wait.
    pipeline.Enqueue(three, 10);
  }
  EXPECT_THAT(log.calls(),
              ElementsAre(ElementsAre(1), ElementsAre(2), ElementsAre(3)));
}

}  // namespace
}  // namespace gradwire
