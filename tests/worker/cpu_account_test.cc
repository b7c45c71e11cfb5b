#include "worker/cpu_account.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

namespace gradwire {
namespace {

// Spins on the calling thread until it has used `seconds` of CPU; returns a
// value the optimizer cannot drop.
double BurnCpu(double seconds) {
  const int64_t end =
      CpuAccount::ThreadCpuNanos() + static_cast<int64_t>(seconds * 1e9);
  double x = 1;
  while (CpuAccount::ThreadCpuNanos() < end) {
    for (int i = 0; i < 1000; ++i) x = std::sqrt(x + i);
  }
  return x;
}

double Sum(const CpuTotals& t) {
  double sum = t.compute + t.other_threads;
  for (double a : t.activity) sum += a;
  return sum;
}

TEST(CpuAccountTest, NamesEveryActivity) {
  EXPECT_STREQ(CpuActivityName(CpuActivity::kCompress), "compress");
  EXPECT_STREQ(CpuActivityName(CpuActivity::kRpc), "rpc");
  EXPECT_STREQ(CpuActivityName(CpuActivity::kSyncOther), "sync_other");
}

TEST(CpuAccountTest, ScopeTimeGrowsWithWorkDone) {
  CpuAccount account;
  account.StartSteps();
  {
    CpuAccount::Scope scope(&account, CpuActivity::kEncode);
    BurnCpu(0.02);
  }
  const double after_little = account.Totals().of(CpuActivity::kEncode);
  {
    CpuAccount::Scope scope(&account, CpuActivity::kEncode);
    BurnCpu(0.1);
  }
  const double after_more = account.Totals().of(CpuActivity::kEncode);
  EXPECT_GE(after_little, 0.02);
  EXPECT_LT(after_little, 0.05);
  EXPECT_GE(after_more - after_little, 0.1);
  EXPECT_LT(after_more - after_little, 0.15);
  EXPECT_EQ(account.Totals().scopes, 2u);
}

TEST(CpuAccountTest, NothingCountsBeforeStartSteps) {
  CpuAccount account;
  {
    CpuAccount::Scope scope(&account, CpuActivity::kRpc);
    BurnCpu(0.01);
  }
  EXPECT_EQ(account.Totals().of(CpuActivity::kRpc), 0);
  EXPECT_EQ(account.Totals().scopes, 0u);
}

TEST(CpuAccountTest, NullAccountCountsNothing) {
  CpuAccount::Scope scope(nullptr, CpuActivity::kRpc);
  BurnCpu(0.001);
}

TEST(CpuAccountTest, NestedScopesAreNotCountedTwice) {
  CpuAccount account;
  account.StartSteps();
  {
    CpuAccount::Scope outer(&account, CpuActivity::kSyncOther);
    BurnCpu(0.03);
    {
      CpuAccount::Scope inner(&account, CpuActivity::kCompress);
      BurnCpu(0.05);
    }
  }
  const CpuTotals t = account.Totals();
  EXPECT_GE(t.of(CpuActivity::kCompress), 0.05);
  EXPECT_LT(t.of(CpuActivity::kCompress), 0.07);
  EXPECT_GE(t.of(CpuActivity::kSyncOther), 0.03);
  EXPECT_LT(t.of(CpuActivity::kSyncOther), 0.05);
}

TEST(CpuAccountTest, MergesThreadsAndSplitsTheStep) {
  CpuAccount account;
  account.StartSteps();
  BurnCpu(0.05);  // The training thread computing.
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&account] {
      CpuAccount::Scope scope(&account, CpuActivity::kCompress);
      BurnCpu(0.04);
    });
  }
  // A thread that enters no scope: other_threads.
  threads.emplace_back([] { BurnCpu(0.06); });
  {
    CpuAccount::Scope scope(&account, CpuActivity::kRpc);
    BurnCpu(0.02);
  }
  for (std::thread& t : threads) t.join();
  account.EndStep();
  const CpuTotals t = account.Totals();
  EXPECT_EQ(t.steps, 1u);
  EXPECT_GE(t.of(CpuActivity::kCompress), 0.12);
  EXPECT_LT(t.of(CpuActivity::kCompress), 0.16);
  EXPECT_GE(t.of(CpuActivity::kRpc), 0.02);
  EXPECT_LT(t.of(CpuActivity::kRpc), 0.04);
  EXPECT_GE(t.compute, 0.05);
  EXPECT_LT(t.compute, 0.08);
  EXPECT_GE(t.other_threads, 0.05);
  EXPECT_LT(t.other_threads, 0.09);
  // Every nanosecond of the process since StartSteps, once: the parts add
  // up to about 0.05 + 0.12 + 0.02 + 0.06 (thread start-up aside).
  EXPECT_GE(Sum(t), 0.25);
  EXPECT_LT(Sum(t), 0.30);
  EXPECT_NEAR(t.communication(), Sum(t) - t.compute, 1e-9);
}

TEST(CpuAccountTest, AccountsKeepTheirOwnBuckets) {
  CpuAccount first;
  CpuAccount second;
  first.StartSteps();
  second.StartSteps();
  {
    CpuAccount::Scope scope(&first, CpuActivity::kDecode);
    BurnCpu(0.01);
  }
  {
    CpuAccount::Scope scope(&second, CpuActivity::kCopy);
    BurnCpu(0.01);
  }
  {
    CpuAccount::Scope scope(&first, CpuActivity::kDecode);
    BurnCpu(0.01);
  }
  EXPECT_GE(first.Totals().of(CpuActivity::kDecode), 0.02);
  EXPECT_EQ(first.Totals().of(CpuActivity::kCopy), 0);
  EXPECT_GE(second.Totals().of(CpuActivity::kCopy), 0.01);
  EXPECT_EQ(second.Totals().of(CpuActivity::kDecode), 0);
}

// The cost of the account itself: printed, so that a run shows what a
// scope costs (each step enters a few dozen).
TEST(CpuAccountTest, ScopeCostIsSmall) {
  CpuAccount account;
  account.StartSteps();
  constexpr int kScopes = 100000;
  const int64_t start = CpuAccount::ThreadCpuNanos();
  for (int i = 0; i < kScopes; ++i) {
    CpuAccount::Scope scope(&account, CpuActivity::kEncode);
  }
  const double ns =
      static_cast<double>(CpuAccount::ThreadCpuNanos() - start) / kScopes;
  std::printf("cpu account: %.0f ns of CPU per scope\n", ns);
  EXPECT_LT(ns, 5000);
}

}  // namespace
}  // namespace gradwire
