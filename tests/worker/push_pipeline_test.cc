// PushPipeline: jobs run in order on one thread, batches form while a job
// runs, Drain waits and reports the first error.
#include "worker/push_pipeline.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;

TEST(PushPipelineTest, RunsEveryKeyInOrderAndDrainWaits) {
  std::vector<uint64_t> seen;  // Read only after Drain.
  PushPipeline pipeline([&](const std::vector<uint64_t>& keys) {
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

TEST(PushPipelineTest, BatchesWhatQueuedWhileAJobRan) {
  absl::Notification started;
  absl::Notification release;
  std::vector<std::vector<uint64_t>> calls;  // Read only after Drain.
  PushPipeline pipeline([&](const std::vector<uint64_t>& keys) {
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

TEST(PushPipelineTest, ReportsTheFirstErrorOnceAndDropsLaterKeys) {
  std::atomic<int> jobs{0};
  absl::Notification release;
  PushPipeline pipeline([&](const std::vector<uint64_t>& keys) {
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

TEST(PushPipelineTest, DestructionFinishesQueuedWork) {
  std::atomic<int> handled{0};
  {
    PushPipeline pipeline([&](const std::vector<uint64_t>& keys) {
      handled += keys.size();
      return absl::OkStatus();
    });
    const uint64_t keys[] = {1, 2, 3};
    pipeline.Enqueue(keys);
  }
  EXPECT_EQ(handled.load(), 3);
}

}  // namespace
}  // namespace gradwire
