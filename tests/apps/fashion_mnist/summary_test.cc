#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/fashion_mnist/trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TrainingResult SomeResult() {
  TrainingResult r;
  r.evaluated = true;
  r.test_accuracy = 98.0 / 256;  // 0.3828125: a tie, to even
  r.steps = 120;
  r.resumed_at_step = 7;
  r.wall_seconds = 12.34567;
  r.train_seconds = 10.0004;
  r.eval_seconds = 2.3456;
  r.final_loss = 0.12345678;
  r.overlapped = true;
  r.pulled_ahead = true;
  r.epoch_loss = {1.5, 0.25};
  r.epoch_test_accuracy = {0.5, 0.75};
  r.weights_fingerprint = "0123456789abcdef";
  r.sync.steps = 113;
  r.sync.pushed_bytes = 1000;
  r.sync.pulled_bytes = 2000;
  r.sync.dense_equivalent_bytes = 30000;
  r.sync.init_bytes = 400;
  r.sync.retries = 3;
  r.sync.max_step_lead = 2;
  r.sync.compress_seconds = 1.0;
  r.sync.push_seconds = 2.0;
  r.sync.pull_seconds = 3.0;
  r.sync.pull_wait_seconds = 0.5;
  r.sync.reduce_seconds = 0.25;
  return r;
}

std::vector<std::string> Keys(const std::string& line) {
  std::vector<std::string> keys;
  const nlohmann::ordered_json summary = nlohmann::ordered_json::parse(line);
  for (const auto& item : summary.items()) {
    keys.push_back(item.key());
  }
  return keys;
}

// Whether every key of `expected` is in `keys`, in the same order (other
// keys may come between).
bool InOrder(const std::vector<std::string>& keys,
             const std::vector<std::string>& expected) {
  auto next = keys.begin();
  for (const std::string& key : expected) {
    next = std::find(next, keys.end(), key);
    if (next == keys.end()) return false;
  }
  return true;
}

TEST(SummaryJsonTest, WritesEveryKeyInItsOrder) {
  const std::vector<std::string> keys =
      Keys(SummaryJson(SomeResult(), SyncOptions()));
  const std::vector<std::string> expected = {"test_accuracy",
                                             "evaluated",
                                             "steps",
                                             "resumed_at_step",
                                             "steps_run",
                                             "max_step_lead",
                                             "wall_seconds",
                                             "train_seconds",
                                             "eval_seconds",
                                             "pushed_bytes",
                                             "pulled_bytes",
                                             "dense_equivalent_bytes",
                                             "init_bytes",
                                             "retries",
                                             "final_loss",
                                             "worker_id",
                                             "num_workers",
                                             "compressor",
                                             "ratio",
                                             "min_kept",
                                             "overlap",
                                             "push_bucket_bytes",
                                             "residual_spare",
                                             "compress_threads",
                                             "error_feedback",
                                             "value_type",
                                             "mode",
                                             "optimizer",
                                             "compress_seconds",
                                             "push_seconds",
                                             "pull_seconds",
                                             "pull_wait_seconds",
                                             "pull_ahead",
                                             "reduce_seconds",
                                             "weights_fingerprint",
                                             "epoch_loss",
                                             "epoch_test_accuracy"};
  EXPECT_TRUE(InOrder(keys, expected)) << ::testing::PrintToString(keys);
  EXPECT_EQ(keys.front(), "test_accuracy");
  EXPECT_EQ(keys.back(), "epoch_test_accuracy");
}

TEST(SummaryJsonTest, IsOneLineWithASpaceAfterEveryColonAndComma) {
  const std::string line = SummaryJson(SomeResult(), SyncOptions());
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_THAT(line, HasSubstr("{\"test_accuracy\": 0.382812, "
                              "\"evaluated\": true, \"steps\": 120, "));
  EXPECT_THAT(line, HasSubstr("\"epoch_loss\": [1.5,0.25], "
                              "\"epoch_test_accuracy\": [0.5,0.75]}"));
}

TEST(SummaryJsonTest, RoundsSecondsToTheMillisecondAndLossToAMillionth) {
  const nlohmann::json summary =
      nlohmann::json::parse(SummaryJson(SomeResult(), SyncOptions()));
  EXPECT_DOUBLE_EQ(summary["wall_seconds"].get<double>(), 12.346);
  EXPECT_DOUBLE_EQ(summary["eval_seconds"].get<double>(), 2.346);
  EXPECT_DOUBLE_EQ(summary["final_loss"].get<double>(), 0.123457);
  EXPECT_EQ(summary["steps_run"], 113);
  EXPECT_EQ(summary["pushed_bytes"], 1000);
  EXPECT_EQ(summary["pull_wait_seconds"], 0.5);
  EXPECT_EQ(summary["weights_fingerprint"], "0123456789abcdef");
  EXPECT_EQ(summary["overlap"], true);
  EXPECT_EQ(summary["pull_ahead"], true);
}

TEST(SummaryJsonTest, LeavesOutTheAccuracyWhenNotEvaluated) {
  TrainingResult r = SomeResult();
  r.evaluated = false;
  const std::string line = SummaryJson(r, SyncOptions());
  EXPECT_THAT(line, Not(HasSubstr("test_accuracy")));
  EXPECT_THAT(line, HasSubstr("\"evaluated\": false"));
}

TEST(SummaryJsonTest, WritesALossThatIsNotFiniteAsNull) {
  TrainingResult r = SomeResult();
  r.final_loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(SummaryJson(r, SyncOptions()), HasSubstr("\"final_loss\": null"));
}

TEST(WeightsFingerprintTest, ChangesWithNamesShapesAndValues) {
  const torch::Tensor values = torch::arange(6, torch::kFloat);
  const std::string base = WeightsFingerprint({{"w", values}});
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(base, WeightsFingerprint({{"w", values.clone()}}));
  EXPECT_NE(base, WeightsFingerprint({{"v", values}}));
  EXPECT_NE(base, WeightsFingerprint({{"w", values.reshape({2, 3})}}));
  EXPECT_NE(base, WeightsFingerprint({{"w", values + 1}}));
}

TEST(WeightsFingerprintTest, IsFnv1aOfTheNameShapeAndFloats) {
  // The empty input hashes to FNV-1a's offset basis.
  EXPECT_EQ(WeightsFingerprint({}), "cbf29ce484222325");
}

}  // namespace
}  // namespace gradwire
