// Compressor "auto" in the worker: its settings, its chooser's state over
// a run, and its pushes against in-memory shards, which aggregate chunks of
// different encodings within one step.
#include "worker/auto_compression.h"

#include <ATen/CPUGeneratorImpl.h>

#include <functional>
#include <set>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/fake_ps_client.h"
#include "worker/parameter_sync.h"
#include "worker/sync_settings.h"

namespace gradwire {
namespace {

using testing::FakePsClient;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(AutoCompressionSettingsTest, AutoResolves) {
  SyncSettings s;
  s.compressor = "auto";
  s.auto_budget = 2.5;
  absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compressor.name, "auto");
  EXPECT_DOUBLE_EQ(options->auto_budget, 2.5);
  EXPECT_TRUE(options->error_feedback);
  // Pulls as beside Top-K 1%, and momentum on the worker as beside Top-K.
  EXPECT_EQ(options->training.pull_encoding().compressor(), "topk");
  EXPECT_DOUBLE_EQ(options->training.pull_encoding().ratio(),
                   kMinAutoPullRatio);
  EXPECT_FLOAT_EQ(options->worker_momentum.momentum, 0.9f);
  s.mode = "ssp";
  EXPECT_TRUE(SyncOptionsFromSettings(s).ok());
  s.mode = "asp";
  EXPECT_TRUE(SyncOptionsFromSettings(s).ok());
  // Exact pulls, as DistributedOptimizer asks: every changed element at
  // fp32, a dense layer's mean dense on the wire (DenseIsSmaller).
  s.pull = "exact";
  auto exact = SyncOptionsFromSettings(s);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->training.pull_encoding().compressor(), "nonzero");
}

// Each bad combination is refused naming its setting.
TEST(AutoCompressionSettingsTest, BadSettingsNameTheOption) {
  const auto error = [](const std::function<void(SyncSettings*)>& change) {
    SyncSettings s;
    s.compressor = "auto";
    change(&s);
    return SyncOptionsFromSettings(s).status();
  };
  absl::Status s = error([](SyncSettings* s) { s->ratio = 0.05; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("--ratio: 0.05 is set"));
  s = error([](SyncSettings* s) { s->auto_budget = 0; });
  EXPECT_THAT(std::string(s.message()),
              StartsWith("--auto-budget: 0 is outside (0, 10]"));
  s = error([](SyncSettings* s) { s->auto_budget = -1; });
  EXPECT_THAT(std::string(s.message()),
              StartsWith("--auto-budget: -1 is outside"));
  s = error([](SyncSettings* s) { s->auto_budget = 11; });
  EXPECT_THAT(std::string(s.message()),
              StartsWith("--auto-budget: 11 is outside"));
  s = error([](SyncSettings* s) { s->error_feedback = false; });
  EXPECT_THAT(std::string(s.message()), StartsWith("--error-feedback: "));
  s = error([](SyncSettings* s) {
    s->compressor = "topk";
    s->auto_budget = 2;
  });
  EXPECT_THAT(std::string(s.message()),
              StartsWith("--auto-budget: applies to --compressor=auto"));
  // Python spells the names its own way.
  SyncSettings python;
  python.compressor = "auto";
  python.ratio = 0.1;
  const absl::Status named =
      SyncOptionsFromSettings(python, [](absl::string_view key) {
        return std::string(key);
      }).status();
  EXPECT_THAT(std::string(named.message()), StartsWith("ratio: "));
}

AutoCompressionOptions Options(metrics::Registry* registry) {
  AutoCompressionOptions options;
  options.base.precision = ValuePrecision::kFp16;
  options.base.min_kept = 64;
  options.registry = registry;
  options.labels = {{"worker", "0"}, {"compressor", "auto"}};
  options.critical.warmup_steps = 0;
  return options;
}

// A slow link makes every group choose fewer bytes than Top-K 1%, and the
// gauge follows the choice.
TEST(AutoCompressionTest, SlowLinkLowersTheRungsAndTheGauge) {
  metrics::Registry registry;
  auto made = AutoCompression::Create(Options(&registry), {"fc1", "fc2"},
                                      {1 << 20, 1 << 18}, {0, 0, 1});
  ASSERT_TRUE(made.ok()) << made.status();
  AutoCompression& chooser = **made;
  EXPECT_EQ(chooser.CompressorFor(0).name(), "topk");
  EXPECT_DOUBLE_EQ(chooser.CompressorFor(0).options().ratio, 0.01);
  // Two steps without a step time, eight that measure the starting
  // choice's, then the choice follows the link.
  for (uint64_t step = 0; step < 15; ++step) {
    // 1 Mbit/s, 30 ms of backward pass.
    chooser.ObserveTransfer(100000, 0.8);
    chooser.ObserveTransfer(25000, 0.2);
    chooser.NoteCompute(0.045, 0.03);
    chooser.NoteChunkNorms(0, 1.0, 0.0);
    chooser.NoteChunkNorms(1, 1.0, 0.0);
    chooser.NoteChunkNorms(2, 1.0, 0.0);
    chooser.BeginStep(step, 0.05);
  }
  EXPECT_LT(chooser.CompressorFor(0).options().ratio, 0.01);
  EXPECT_LT(chooser.CompressorFor(2).options().ratio, 0.01);
  const AutoCompressionReport& report = chooser.report();
  ASSERT_EQ(report.history.size(), 15u);
  EXPECT_NEAR(report.history.back().link_bytes_per_second, 125000, 1000);
  EXPECT_LT(report.history.back().ratios[0], 0.01);
  bool found = false;
  for (const metrics::FamilySnapshot& family : registry.Collect()) {
    if (family.name != "gradwire_worker_chosen_ratio") continue;
    found = true;
    ASSERT_EQ(family.samples.size(), 2u);
    for (const auto& sample : family.samples) EXPECT_LT(sample.value, 0.01);
  }
  EXPECT_TRUE(found);
}

TEST(AutoCompressionTest, SummaryJsonHoldsTheLastChoiceAndTheHistory) {
  auto made = AutoCompression::Create(Options(nullptr), {"fc\"1", "fc2"},
                                      {1 << 20, 1 << 18}, {0, 1});
  ASSERT_TRUE(made.ok()) << made.status();
  for (uint64_t step = 0; step < 15; ++step) {
    (*made)->ObserveTransfer(100000, 0.8);
    (*made)->NoteCompute(0.045, 0.03);
    (*made)->BeginStep(step, 0);
  }
  const nlohmann::json json = nlohmann::json::parse(
      AutoCompressionSummaryJson((*made)->report()), nullptr, false);
  ASSERT_FALSE(json.is_discarded())
      << AutoCompressionSummaryJson((*made)->report());
  EXPECT_NEAR(json["auto_link_bytes_per_second"].get<double>(), 125000, 10);
  EXPECT_EQ(json["auto_chosen_ratios"].size(), 2u);
  EXPECT_LT(json["auto_chosen_ratios"]["fc\"1"].get<double>(), 0.01);
  const nlohmann::json& history = json["auto_history"];
  EXPECT_EQ(history["steps"].size(), 15u);
  EXPECT_EQ(history["steps"][11], 11);
  EXPECT_EQ(history["ratios"]["fc2"].size(), 15u);
  EXPECT_EQ(history["budget_bytes"].size(), 15u);
}

// Before a step time is measured nothing changes, critical phase or not:
// the first change is verified against the starting rung's step time.
TEST(AutoCompressionTest, NoChangeBeforeTheStepTimeIsMeasured) {
  auto made =
      AutoCompression::Create(Options(nullptr), {"fc1"}, {1 << 20}, {0});
  ASSERT_TRUE(made.ok()) << made.status();
  // The first two notes give no step time (the first step holds the
  // start-up).
  for (uint64_t step = 0; step < 2; ++step) {
    (*made)->ObserveTransfer(100000, 0.8);
    (*made)->NoteCompute(0.045, 0.03);
    (*made)->NoteChunkNorms(0, 100.0 / (step + 1), 0.0);
    (*made)->BeginStep(step, 0.05);
  }
  EXPECT_DOUBLE_EQ((*made)->CompressorFor(0).options().ratio, 0.01);
}

// The budget at the last evaluation after `steps` steps on a fast link,
// with the wall-clock compute `wall_backward` and, when `cpu_compute` > 0,
// the CPU account's compute and `cpu_per_byte`.
double BudgetAfter(double wall_backward, double cpu_compute,
                   double cpu_per_byte) {
  auto made =
      AutoCompression::Create(Options(nullptr), {"fc1"}, {1 << 20}, {0});
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return 0;
  double cpu_total = 0;
  double byte_cpu_total = 0;
  double bytes_total = 0;
  for (uint64_t step = 0; step < 4; ++step) {
    // 1 Gbit/s.
    (*made)->ObserveTransfer(1250000, 0.01);
    (*made)->NoteCompute(wall_backward * 1.5, wall_backward);
    if (cpu_compute > 0) {
      (*made)->NoteCpu(cpu_total, byte_cpu_total, bytes_total);
      cpu_total += cpu_compute;
      bytes_total += 1e6;
      byte_cpu_total += 1e6 * cpu_per_byte;
    }
    (*made)->BeginStep(step, 0);
  }
  return (*made)->report().history.back().budget_bytes;
}

// A wall-clock backward time inflated by the pushes' own CPU does not
// widen the budget: the training thread's CPU compute bounds it; and CPU
// spent per byte shrinks it further.
TEST(AutoCompressionTest, CpuComputeAndCpuPerByteBoundTheBudget) {
  const double wall = BudgetAfter(0.2, 0, 0);
  const double cpu = BudgetAfter(0.2, 0.06, 0);
  const double per_byte = BudgetAfter(0.2, 0.06, 20e-9);
  EXPECT_GT(wall, 0);
  EXPECT_LT(cpu, wall * 0.4);
  EXPECT_GT(cpu, 0);
  EXPECT_LT(per_byte, cpu * 0.5);
  EXPECT_GT(per_byte, 0);
}

TEST(AutoCompressionTest, LearningRateSchedule) {
  v1::OptimizerConfig optimizer;
  optimizer.set_learning_rate(0.1f);
  optimizer.set_schedule(v1::LR_SCHEDULE_KIND_STEP);
  optimizer.set_step_size(10);
  optimizer.set_gamma(0.1f);
  EXPECT_NEAR(ScheduledLearningRate(optimizer, 9), 0.1, 1e-6);
  EXPECT_NEAR(ScheduledLearningRate(optimizer, 10), 0.01, 1e-6);
  optimizer.set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  EXPECT_NEAR(ScheduledLearningRate(optimizer, 10), 0.1, 1e-6);
}

torch::Tensor Gradient(const torch::Tensor& like, uint32_t w, uint64_t step) {
  auto generator =
      at::detail::createCPUGenerator(1000 * step + 10 * w + like.numel());
  return torch::randn(like.sizes(), generator, torch::kFloat32);
}

ParameterSync::NamedTensors MakeParameters() {
  return {{"a", torch::arange(0, 400, torch::kFloat32).mul_(0.001)},
          {"b", torch::linspace(-1, 1, 7, torch::kFloat32)}};
}

SyncOptions WorkerOptions(uint32_t worker, const std::string& compressor) {
  SyncOptions options;
  options.client.worker_id = worker;
  options.num_workers = 2;
  options.compressor.name = compressor;
  options.compressor.ratio = 1.0;
  options.partition_bytes = 256;
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(0.1f);
  options.pull_deltas = false;
  return options;
}

struct WorkerRun {
  ParameterSync::NamedTensors parameters = MakeParameters();
  std::unique_ptr<ParameterSync> sync;
  absl::Status status;
};

void RunWorkers(const std::string& first, const std::string& second, int steps,
                WorkerRun* runs) {
  auto shards = FakePsClient::MakeShards(2);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      WorkerRun& run = runs[w];
      auto sync =
          ParameterSync::Create(WorkerOptions(w, w == 0 ? first : second),
                                std::make_unique<FakePsClient>(shards));
      if (!sync.ok()) {
        run.status = sync.status();
        return;
      }
      run.sync = *std::move(sync);
      run.status = run.sync->Register(run.parameters);
      for (int step = 0; step < steps && run.status.ok(); ++step) {
        for (auto& [name, p] : run.parameters) {
          p.mutable_grad() = Gradient(p, w, step);
        }
        run.status = run.sync->Step();
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// The shards average each step's pushes whatever their encodings: one
// worker pushing dense fp32, the other every element as a sparse Top-K
// message, make the same weights as averaged SGD.
TEST(AutoCompressionTest, ShardsAggregateMixedEncodingsInAStep) {
  WorkerRun runs[2];
  RunWorkers("none", "topk", 3, runs);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  ParameterSync::NamedTensors expected = MakeParameters();
  for (uint64_t step = 0; step < 3; ++step) {
    for (auto& [name, p] : expected) {
      p.sub_(0.1 * 0.5 * (Gradient(p, 0, step) + Gradient(p, 1, step)));
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(runs[0].parameters[i].second,
                                expected[i].second, 1e-5, 1e-6));
    EXPECT_TRUE(torch::equal(runs[0].parameters[i].second,
                             runs[1].parameters[i].second));
  }
}

// Two "auto" workers train together (each on its own choices), beside a
// fixed compressor too, and keep a report of every step's choice.
TEST(AutoCompressionTest, AutoWorkersTrainAndReport) {
  for (const std::string second : {"auto", "topk"}) {
    WorkerRun runs[2];
    RunWorkers("auto", second, 8, runs);
    ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
    ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
    for (size_t i = 0; i < runs[0].parameters.size(); ++i) {
      EXPECT_TRUE(torch::equal(runs[0].parameters[i].second,
                               runs[1].parameters[i].second));
      EXPECT_TRUE(
          torch::isfinite(runs[0].parameters[i].second).all().item<bool>());
    }
    const AutoCompressionReport* report = runs[0].sync->auto_compression();
    ASSERT_NE(report, nullptr);
    EXPECT_THAT(report->groups, ::testing::ElementsAre("a", "b"));
    ASSERT_EQ(report->history.size(), 8u);
    const std::set<double> ladder = {0.001, 0.002, 0.005, 0.01, 0.02,
                                     0.05,  0.1,   0.5,   1.0};
    for (const AutoCompressionStep& entry : report->history) {
      ASSERT_EQ(entry.ratios.size(), 2u);
      for (const double ratio : entry.ratios) EXPECT_TRUE(ladder.count(ratio));
    }
    EXPECT_GT(report->history.back().link_bytes_per_second, 0);
    EXPECT_EQ(runs[1].sync->auto_compression() != nullptr, second == "auto");
  }
}

}  // namespace
}  // namespace gradwire
