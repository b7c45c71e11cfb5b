// MemoryBudget and MemoryLease (memory_budget.h): reservations, refusals,
// leases that give their bytes back, and concurrent use.
#include "server/shard/memory_budget.h"

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(MemoryBudgetTest, ReservesUntilTheLimitAndGivesBackOnDestruction) {
  MemoryBudget budget(1000);
  EXPECT_EQ(budget.limit(), 1000u);
  {
    auto a = budget.Reserve(600, "pull answer");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->bytes(), 600u);
    auto b = budget.Reserve(400, "decoded push");
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(budget.used(), 1000u);
    auto zero = budget.Reserve(0, "nothing");
    EXPECT_TRUE(zero.ok());
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, RefusalNamesWhatTheBytesTheUseAndTheFlag) {
  std::vector<std::string> refused;
  MemoryBudget budget(
      1000, [&refused](absl::string_view what) { refused.emplace_back(what); });
  auto held = budget.Reserve(700, "pull answer");
  ASSERT_TRUE(held.ok());
  auto over = budget.Reserve(301, "decoded push");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(over.status().message());
  EXPECT_NE(message.find("decoded push"), std::string::npos) << message;
  EXPECT_NE(message.find("301 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("700 of 1000 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("--memory-budget-bytes"), std::string::npos)
      << message;
  EXPECT_EQ(budget.used(), 700u);
  EXPECT_EQ(refused, std::vector<std::string>{"decoded push"});
  // Larger than the whole budget: refused without overflow.
  EXPECT_FALSE(budget.Reserve(UINT64_MAX, "huge").ok());
  EXPECT_EQ(budget.used(), 700u);
}

TEST(MemoryBudgetTest, LeasesMoveGrowShrinkAndRelease) {
  MemoryBudget budget(100);
  auto reserved = budget.Reserve(10, "a");
  ASSERT_TRUE(reserved.ok());
  MemoryLease lease = *std::move(reserved);
  MemoryLease moved(std::move(lease));
  EXPECT_EQ(lease.bytes(), 0u);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.bytes(), 10u);
  EXPECT_TRUE(moved.Grow(80, "a").ok());
  EXPECT_EQ(budget.used(), 90u);
  const absl::Status over = moved.Grow(11, "a");
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(moved.bytes(), 90u);
  moved.Shrink(40);
  EXPECT_EQ(budget.used(), 50u);
  moved.Shrink(1000);
  EXPECT_EQ(moved.bytes(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  ASSERT_TRUE(moved.Grow(5, "a").ok());
  MemoryLease other;
  EXPECT_EQ(other.Grow(1, "a").code(), absl::StatusCode::kFailedPrecondition);
  other = std::move(moved);
  EXPECT_EQ(budget.used(), 5u);
  other.Release();
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, ConcurrentReservationsNeverPassTheLimit) {
  constexpr uint64_t kLimit = 1000;
  constexpr int kThreads = 8;
  MemoryBudget budget(kLimit);
  std::atomic<uint64_t> granted{0};
  std::atomic<bool> passed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&budget, &granted, &passed, t] {
      for (int i = 0; i < 20000; ++i) {
        auto lease = budget.Reserve(100 + t, "test");
        if (!lease.ok()) continue;
        granted.fetch_add(1, std::memory_order_relaxed);
        if (budget.used() > kLimit) passed.store(true);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(passed.load());
  EXPECT_GT(granted.load(), 0u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, TrimScratchFreesOnlyLargeBuffers) {
  std::vector<float> small(1024);
  TrimScratch(&small);
  EXPECT_GE(small.capacity(), 1024u);
  std::vector<float> large(kRetainedScratchBytes / sizeof(float) + 1);
  TrimScratch(&large);
  EXPECT_EQ(large.capacity(), 0u);
}

}  // namespace
}  // namespace gradwire
