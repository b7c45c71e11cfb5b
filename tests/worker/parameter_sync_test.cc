// ParameterSync against in-memory shards: the public worker API end to end,
// without processes.
#include "worker/parameter_sync.h"

#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_ps_client.h"

namespace gradwire {
namespace {

using testing::FakePsClient;

constexpr float kLearningRate = 0.1f;

SyncOptions Options(uint32_t worker_id, const std::string& compressor,
                    bool deltas, float worker_momentum = 0.0f) {
  SyncOptions options;
  options.worker_momentum.momentum = worker_momentum;
  options.client.worker_id = worker_id;
  options.num_workers = 2;
  options.compressor.name = compressor;
  options.compressor.ratio = 0.25;
  options.partition_bytes = 64;  // 16 floats: several chunks on both shards.
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(kLearningRate);
  options.pull_deltas = deltas;
  // With overlap, each announced gradient goes at once (tests of batches
  // set a bucket of their own).
  options.push_bucket_bytes = 0;
  if (deltas) {
    options.training.mutable_pull_encoding()->set_compressor("topk");
    options.training.mutable_pull_encoding()->set_ratio(0.25);
  }
  return options;
}

// A small "model": two tensors with fixed initial values.
ParameterSync::NamedTensors MakeParameters() {
  torch::Tensor a =
      torch::arange(0, 40, torch::kFloat32).mul_(0.01).reshape({5, 8});
  torch::Tensor b = torch::linspace(-1, 1, 7, torch::kFloat32);
  return {{"a", a}, {"b", b}};
}

// The gradient worker `w` computes at `step` for a tensor like `like`.
// A generator of its own: the two workers run in threads, and the global
// one would interleave their draws.
torch::Tensor Gradient(const torch::Tensor& like, uint32_t w, uint64_t step) {
  auto generator =
      at::detail::createCPUGenerator(1000 * step + 10 * w + like.numel());
  return torch::randn(like.sizes(), generator, torch::kFloat32);
}

struct WorkerRun {
  ParameterSync::NamedTensors parameters = MakeParameters();
  std::unique_ptr<ParameterSync> sync;
  absl::Status status;
};

// Runs both workers for `steps` BSP steps in two threads. With `overlap`,
// every parameter but the first is announced through GradientReady (last
// one first, as backward() finishes them); Step() pushes the first.
void RunWorkers(std::vector<std::shared_ptr<Shard>> shards,
                const std::string& compressor, bool deltas, int steps,
                WorkerRun* runs, bool overlap = false,
                float worker_momentum = 0.0f,
                const std::function<void(SyncOptions*)>& adjust = nullptr) {
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      WorkerRun& run = runs[w];
      SyncOptions options = Options(w, compressor, deltas, worker_momentum);
      if (adjust) adjust(&options);
      auto sync = ParameterSync::Create(options,
                                        std::make_unique<FakePsClient>(shards));
      if (!sync.ok()) {
        run.status = sync.status();
        return;
      }
      run.sync = std::move(*sync);
      run.status = run.sync->Register(run.parameters);
      for (int step = 0; step < steps && run.status.ok(); ++step) {
        // The "forward pass": with pull ahead, each parameter is awaited
        // before it is read.
        for (size_t i = 0; i < run.parameters.size() && run.status.ok(); ++i) {
          run.status = run.sync->AwaitParameter(i);
        }
        for (auto& [name, p] : run.parameters)
          p.mutable_grad() = Gradient(p, w, step);
        for (size_t i = run.parameters.size() - 1;
             overlap && run.status.ok() && i > 0; --i) {
          if (run.status = run.sync->GradientReady(i); !run.status.ok()) break;
        }
        if (run.status.ok()) run.status = run.sync->Step();
      }
      if (run.status.ok()) run.status = run.sync->AwaitWeights();
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(ParameterSyncTest, DenseBspEqualsAveragedSgd) {
  WorkerRun runs[2];
  RunWorkers(FakePsClient::MakeShards(2), "none", /*deltas=*/false, 4, runs);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  ParameterSync::NamedTensors expected = MakeParameters();
  for (uint64_t step = 0; step < 4; ++step) {
    for (auto& [name, p] : expected) {
      p.sub_(kLearningRate * 0.5 *
             (Gradient(p, 0, step) + Gradient(p, 1, step)));
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(runs[0].parameters[i].second,
                                expected[i].second, 1e-5, 1e-6))
        << expected[i].first;
    EXPECT_TRUE(torch::equal(runs[0].parameters[i].second,
                             runs[1].parameters[i].second));
  }
  EXPECT_EQ(runs[0].sync->step(), 4u);
  EXPECT_EQ(runs[0].sync->stats().steps, 4u);
}

// Momentum on the workers with SGD on the shards is dense momentum on the
// mean gradient (the mean of the velocities is the velocity of the mean).
// A worker that starts again (a restart, or a new ParameterSync) starts
// with a zero velocity: velocities are not checkpointed.
TEST(ParameterSyncTest, WorkerMomentumIsDenseMomentumAndRestartsFromZero) {
  constexpr float kMomentum = 0.5f;
  auto shards = FakePsClient::MakeShards(2);
  WorkerRun runs[2];
  RunWorkers(shards, "none", /*deltas=*/false, 3, runs, /*overlap=*/false,
             kMomentum);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  ParameterSync::NamedTensors expected = MakeParameters();
  std::vector<torch::Tensor> velocity;
  for (auto& [name, p] : expected) velocity.push_back(torch::zeros_like(p));
  auto dense_step = [&](uint64_t step) {
    for (size_t i = 0; i < expected.size(); ++i) {
      torch::Tensor& p = expected[i].second;
      velocity[i].mul_(kMomentum).add_(
          0.5 * (Gradient(p, 0, step) + Gradient(p, 1, step)));
      p.sub_(kLearningRate * velocity[i]);
    }
  };
  for (uint64_t step = 0; step < 3; ++step) dense_step(step);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(runs[0].parameters[i].second,
                                expected[i].second, 1e-5, 1e-6))
        << expected[i].first;
  }
  // New ParameterSyncs resume at step 3 with zero velocities: their first
  // push is the plain gradient of their step 0.
  WorkerRun resumed[2];
  RunWorkers(shards, "none", /*deltas=*/false, 1, resumed, /*overlap=*/false,
             kMomentum);
  ASSERT_TRUE(resumed[0].status.ok()) << resumed[0].status;
  EXPECT_EQ(resumed[0].sync->step(), 4u);
  for (torch::Tensor& v : velocity) v.zero_();
  dense_step(0);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(resumed[0].parameters[i].second,
                                expected[i].second, 1e-5, 1e-6))
        << expected[i].first;
  }
}

// 1-bit Adam (sync_settings.cc's PlaceAdam): a velocity with beta1 on the
// workers, dense fp32 pushes for the first kFreeze steps, the shards' Adam
// freezing its second moment after kFreeze updates.
constexpr int kFreeze = 2;
constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kAdamLr = 0.01f;

void OneBitAdam(SyncOptions* options) {
  v1::OptimizerConfig* adam = options->training.mutable_optimizer();
  adam->set_kind(v1::OPTIMIZER_KIND_ADAM);
  adam->set_learning_rate(kAdamLr);
  adam->set_momentum(kBeta1);
  adam->set_beta2(kBeta2);
  adam->set_epsilon(1e-8f);
  adam->set_freeze_variance_after(kFreeze);
  options->worker_momentum.momentum = kBeta1;
  options->worker_momentum.dense_steps = kFreeze;
}

// Adam on the mean gradient for kFreeze steps, then the frozen rule on the
// mean velocity, for `steps` steps.
ParameterSync::NamedTensors OneBitAdamReference(int steps) {
  ParameterSync::NamedTensors expected = MakeParameters();
  for (auto& [name, p] : expected) {
    torch::Tensor m = torch::zeros_like(p), v = torch::zeros_like(p),
                  u = torch::zeros_like(p);
    double frozen_bc2 = 1;
    for (int step = 0; step < steps; ++step) {
      const torch::Tensor g =
          0.5 * (Gradient(p, 0, step) + Gradient(p, 1, step));
      u.mul_(kBeta1).add_(g);
      if (step < kFreeze) {
        const int t = step + 1;
        m.mul_(kBeta1).add_((1 - kBeta1) * g);
        v.mul_(kBeta2).add_((1 - kBeta2) * g * g);
        frozen_bc2 = 1 - std::pow(double{kBeta2}, t);
        const double bc1 = 1 - std::pow(double{kBeta1}, t);
        p.sub_(kAdamLr / bc1 * m / (v.sqrt() / std::sqrt(frozen_bc2) + 1e-8));
      } else {
        p.sub_(kAdamLr * (1 - kBeta1) * u /
               (v.sqrt() / std::sqrt(frozen_bc2) + 1e-8));
      }
    }
  }
  return expected;
}

TEST(ParameterSyncTest, OneBitAdamPushesDenseGradientsUntilTheFreeze) {
  // Top-K 25% would lose three quarters of each gradient: a match at
  // 1e-6 means the warm-up pushes were dense fp32.
  WorkerRun runs[2];
  RunWorkers(FakePsClient::MakeShards(2), "topk", /*deltas=*/false, kFreeze,
             runs, /*overlap=*/false, 0.0f, OneBitAdam);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  const ParameterSync::NamedTensors expected = OneBitAdamReference(kFreeze);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(runs[0].parameters[i].second,
                                expected[i].second, 1e-5, 1e-6))
        << expected[i].first;
  }
  const SyncStats& stats = runs[0].sync->stats();
  EXPECT_GE(stats.pushed_bytes, stats.dense_equivalent_bytes);
}

TEST(ParameterSyncTest, OneBitAdamThenAppliesTheMeanVelocityOverFrozenV) {
  // Uncompressed, so that the mean of the pushes is the mean velocity.
  WorkerRun runs[2];
  RunWorkers(FakePsClient::MakeShards(2), "none", /*deltas=*/false, 5, runs,
             /*overlap=*/false, 0.0f, OneBitAdam);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  const ParameterSync::NamedTensors expected = OneBitAdamReference(5);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(runs[0].parameters[i].second,
                                expected[i].second, 1e-4, 1e-5))
        << expected[i].first << "\n"
        << runs[0].parameters[i].second << "\n"
        << expected[i].second;
  }
}

TEST(ParameterSyncTest, TopKWithDeltasKeepsReplicasIdenticalAndSendsLess) {
  auto shards = FakePsClient::MakeShards(2);
  WorkerRun runs[2];
  RunWorkers(shards, "topk", /*deltas=*/true, 6, runs);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  for (size_t i = 0; i < runs[0].parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(runs[0].parameters[i].second,
                             runs[1].parameters[i].second));
  }
  // The replicas equal the shards' shadow: a fresh client's dense pull.
  WorkerRun observer;
  auto sync = ParameterSync::Create(Options(0, "topk", true),
                                    std::make_unique<FakePsClient>(shards));
  ASSERT_TRUE(sync.ok());
  ASSERT_TRUE((*sync)->Register(observer.parameters).ok());
  for (size_t i = 0; i < observer.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(observer.parameters[i].second,
                             runs[0].parameters[i].second));
  }
  // The observer resumed at worker 0's next step.
  EXPECT_EQ((*sync)->step(), 6u);
  const SyncStats& stats = runs[0].sync->stats();
  EXPECT_GT(stats.pushed_bytes, 0u);
  EXPECT_LT(stats.pushed_bytes, stats.dense_equivalent_bytes);
}

// SaveState / LoadState: a worker that registers again with the shards at
// the same step takes the saved residuals back exactly; another worker's
// state or another step's is refused and changes nothing.
TEST(ParameterSyncTest, WorkerStateRoundTripsAndIsChecked) {
  auto shards = FakePsClient::MakeShards(2);
  WorkerRun runs[2];
  RunWorkers(shards, "topk", /*deltas=*/true, 3, runs);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  absl::StatusOr<std::string> saved = runs[0].sync->SaveState();
  absl::StatusOr<std::string> other = runs[1].sync->SaveState();
  ASSERT_TRUE(saved.ok() && other.ok()) << saved.status();

  WorkerRun restarted;
  auto sync = ParameterSync::Create(Options(0, "topk", true),
                                    std::make_unique<FakePsClient>(shards));
  ASSERT_TRUE(sync.ok());
  ASSERT_TRUE((*sync)->Register(restarted.parameters).ok());
  ASSERT_EQ((*sync)->step(), 3u);
  const absl::StatusOr<std::string> fresh = (*sync)->SaveState();
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(*fresh, *saved);  // Zero residuals: there was something to save.

  const absl::Status wrong_worker = (*sync)->LoadState(*other);
  EXPECT_EQ(wrong_worker.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_worker.message()),
              ::testing::HasSubstr("worker 1's, not worker 0's"));
  EXPECT_EQ((*sync)->LoadState("not a state").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*(*sync)->SaveState(), *fresh);  // Nothing changed.

  ASSERT_TRUE((*sync)->LoadState(*saved).ok());
  EXPECT_EQ(*(*sync)->SaveState(), *saved);

  // The shards move on: worker 0's state of step 3 no longer fits.
  WorkerRun more[2];
  RunWorkers(shards, "topk", /*deltas=*/true, 1, more);
  ASSERT_TRUE(more[0].status.ok()) << more[0].status;
  const absl::Status stale = more[0].sync->LoadState(*saved);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stale.message()),
              ::testing::HasSubstr("saved before step 3"));
}

// A tensor registered uncompressed goes exactly (every nonzero element at
// fp32) beside Top-K chunks: with dense pulls its weights are dense SGD's.
TEST(ParameterSyncTest, UncompressedTensorsAreExchangedExactly) {
  auto shards = FakePsClient::MakeShards(2);
  std::vector<torch::Tensor> finals(2);
  std::vector<std::thread> threads;
  std::vector<absl::Status> statuses(2);
  for (uint32_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      ParameterSync::NamedTensors parameters = MakeParameters();
      auto sync = ParameterSync::Create(Options(w, "topk", false),
                                        std::make_unique<FakePsClient>(shards));
      if (!sync.ok()) {
        statuses[w] = sync.status();
        return;
      }
      statuses[w] = (*sync)->Register(parameters, {false, true});
      for (uint64_t step = 0; step < 3 && statuses[w].ok(); ++step) {
        for (auto& [name, p] : parameters)
          p.mutable_grad() = Gradient(p, w, step);
        statuses[w] = (*sync)->Step();
      }
      finals[w] = parameters[1].second;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  ASSERT_TRUE(statuses[1].ok()) << statuses[1];
  torch::Tensor expected = MakeParameters()[1].second;
  for (uint64_t step = 0; step < 3; ++step) {
    expected -= kLearningRate *
                (Gradient(expected, 0, step) + Gradient(expected, 1, step)) / 2;
  }
  EXPECT_TRUE(torch::allclose(finals[0], expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(finals[0], finals[1]));
}

TEST(ParameterSyncTest, OverlapPushesTheSameAndEndsWithTheSameWeights) {
  WorkerRun plain[2];
  RunWorkers(FakePsClient::MakeShards(2), "topk", /*deltas=*/true, 5, plain);
  WorkerRun overlapped[2];
  RunWorkers(FakePsClient::MakeShards(2), "topk", /*deltas=*/true, 5,
             overlapped, /*overlap=*/true);
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(plain[w].status.ok()) << plain[w].status;
    ASSERT_TRUE(overlapped[w].status.ok()) << overlapped[w].status;
    for (size_t i = 0; i < plain[w].parameters.size(); ++i) {
      EXPECT_TRUE(torch::equal(plain[w].parameters[i].second,
                               overlapped[w].parameters[i].second))
          << plain[w].parameters[i].first;
    }
    EXPECT_EQ(overlapped[w].sync->stats().steps, 5u);
    EXPECT_EQ(overlapped[w].sync->stats().dense_equivalent_bytes,
              plain[w].sync->stats().dense_equivalent_bytes);
  }
}

// Gradients announced during backward() wait for a bucket's worth of fp32
// bytes. Parameter "b" (7 floats: 28 bytes, one chunk on one shard) fills
// a 28-byte bucket by itself and is pushed before Step(); with a 32-byte
// bucket it waits and goes with "a" (40 floats, chunks on both shards) at
// Step(): one request per shard. One worker, so that no step waits.
TEST(ParameterSyncTest, PushBucketsHoldAnnouncedGradientsUntilFull) {
  for (const uint64_t bucket : {uint64_t{28}, uint64_t{32}}) {
    SyncOptions options = Options(0, "topk", /*deltas=*/true);
    options.num_workers = 1;
    options.push_bucket_bytes = bucket;
    std::atomic<uint64_t> push_requests{0};
    auto client = std::make_unique<FakePsClient>(FakePsClient::MakeShards(2));
    client->CountPushRequestsIn(&push_requests);
    auto sync = ParameterSync::Create(options, std::move(client));
    ASSERT_TRUE(sync.ok()) << sync.status();
    ParameterSync::NamedTensors parameters = MakeParameters();
    ASSERT_TRUE((*sync)->Register(parameters).ok());
    for (uint64_t step = 0; step < 3; ++step) {
      for (auto& [name, p] : parameters)
        p.mutable_grad() = Gradient(p, 0, step);
      const uint64_t before = push_requests.load();
      ASSERT_TRUE((*sync)->GradientReady(1).ok());
      if (bucket == 28) {
        for (int i = 0; i < 5000 && push_requests.load() == before; ++i) {
          absl::SleepFor(absl::Milliseconds(1));
        }
        EXPECT_EQ(push_requests.load(), before + 1) << "step " << step;
      } else {
        absl::SleepFor(absl::Milliseconds(20));
        EXPECT_EQ(push_requests.load(), before) << "step " << step;
      }
      ASSERT_TRUE((*sync)->Step().ok());
      EXPECT_EQ(push_requests.load(), before + (bucket == 28 ? 3 : 2))
          << "bucket " << bucket << ", step " << step;
    }
  }
}

// A chunk of FeedbackState::kSpareFrom floats takes the spare-residual
// path by default; turning residual_spare off ends with the same weights,
// and a non-finite gradient is refused either way with the weights as
// they were.
TEST(ParameterSyncTest, ResidualSpareEndsWithTheSameWeights) {
  const auto run = [](bool spare) {
    SyncOptions options = Options(0, "topk", /*deltas=*/true);
    options.num_workers = 1;
    options.compressor.ratio = 0.01;
    options.partition_bytes = FeedbackState::kSpareFrom * sizeof(float);
    options.residual_spare = spare;
    auto sync = ParameterSync::Create(
        options, std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
    EXPECT_TRUE(sync.ok()) << sync.status();
    ParameterSync::NamedTensors parameters = {
        {"w",
         torch::linspace(-1, 1, FeedbackState::kSpareFrom, torch::kFloat32)}};
    EXPECT_TRUE((*sync)->Register(parameters).ok());
    for (uint64_t step = 0; step < 3; ++step) {
      torch::Tensor& w = parameters[0].second;
      w.mutable_grad() = Gradient(w, 0, step);
      EXPECT_TRUE((*sync)->Step().ok()) << "step " << step;
    }
    const torch::Tensor before = parameters[0].second.clone();
    torch::Tensor& w = parameters[0].second;
    w.mutable_grad() = Gradient(w, 0, 3);
    w.mutable_grad()[12345] = std::numeric_limits<float>::quiet_NaN();
    const absl::Status refused = (*sync)->Step();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(std::string(refused.message()).find("element 12345"),
              std::string::npos)
        << refused;
    EXPECT_TRUE(torch::equal(w, before));
    return before;
  };
  EXPECT_TRUE(torch::equal(run(true), run(false)));
}

// The same weights whatever the bucket.
TEST(ParameterSyncTest, PushBucketsEndWithTheSameWeights) {
  WorkerRun plain[2];
  RunWorkers(FakePsClient::MakeShards(2), "topk", /*deltas=*/true, 4, plain);
  for (const uint64_t bucket : {uint64_t{28}, uint64_t{1} << 20}) {
    WorkerRun bucketed[2];
    RunWorkers(FakePsClient::MakeShards(2), "topk", /*deltas=*/true, 4,
               bucketed, /*overlap=*/true, 0.0f,
               [bucket](SyncOptions* options) {
                 options->push_bucket_bytes = bucket;
                 options->pull_ahead = true;
               });
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(bucketed[w].status.ok()) << bucketed[w].status;
      for (size_t i = 0; i < plain[w].parameters.size(); ++i) {
        EXPECT_TRUE(torch::equal(plain[w].parameters[i].second,
                                 bucketed[w].parameters[i].second))
            << plain[w].parameters[i].first << " bucket " << bucket;
      }
    }
  }
}

TEST(ParameterSyncTest, PullAheadEndsWithTheSameWeights) {
  for (const bool deltas : {false, true}) {
    WorkerRun plain[2];
    RunWorkers(FakePsClient::MakeShards(2), "topk", deltas, 5, plain);
    WorkerRun ahead[2];
    RunWorkers(FakePsClient::MakeShards(2), "topk", deltas, 5, ahead,
               /*overlap=*/true, 0.0f,
               [](SyncOptions* options) { options->pull_ahead = true; });
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(plain[w].status.ok()) << plain[w].status;
      ASSERT_TRUE(ahead[w].status.ok()) << ahead[w].status;
      for (size_t i = 0; i < plain[w].parameters.size(); ++i) {
        EXPECT_TRUE(torch::equal(plain[w].parameters[i].second,
                                 ahead[w].parameters[i].second))
            << plain[w].parameters[i].first << " deltas " << deltas;
      }
      const SyncStats& stats = ahead[w].sync->stats();
      EXPECT_EQ(stats.steps, 5u);
      // The same chunks, in more responses (one per batch of pushed
      // chunks): only their headers add bytes.
      const uint64_t plain_pulled = plain[w].sync->stats().pulled_bytes;
      EXPECT_GE(stats.pulled_bytes, plain_pulled);
      EXPECT_LE(stats.pulled_bytes, plain_pulled * 11 / 10);
      EXPECT_GT(stats.pull_seconds, 0);
      EXPECT_GE(stats.pull_wait_seconds, 0);
      EXPECT_EQ(stats.max_step_lead, 0u);
    }
  }
}

// With pull ahead, Step() returns while the BSP step still waits for the
// other worker, and a parameter's weights are held back until it is done.
TEST(ParameterSyncTest, PullAheadStepReturnsBeforeThePeerAndAwaitWaits) {
  auto shards = FakePsClient::MakeShards(2);
  WorkerRun runs[2];
  for (uint32_t w = 0; w < 2; ++w) {
    SyncOptions options = Options(w, "none", /*deltas=*/false);
    options.pull_ahead = true;
    auto sync =
        ParameterSync::Create(options, std::make_unique<FakePsClient>(shards));
    ASSERT_TRUE(sync.ok()) << sync.status();
    runs[w].sync = *std::move(sync);
  }
  // Register blocks for nobody: the first Init wins and pulls at step 0.
  for (WorkerRun& run : runs)
    ASSERT_TRUE(run.sync->Register(run.parameters).ok());
  WorkerRun& first = runs[0];
  for (auto& [name, p] : first.parameters) p.mutable_grad() = Gradient(p, 0, 0);
  for (size_t i = first.parameters.size(); i-- > 0;) {
    ASSERT_TRUE(first.sync->GradientReady(i).ok());
  }
  // Not while the step's gradients are being pushed; nothing changes.
  EXPECT_EQ(first.sync->SetPullAhead(false).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(first.sync->pull_ahead());
  // Worker 1 has not pushed: without pull ahead this would block.
  ASSERT_TRUE(first.sync->Step().ok());
  const torch::Tensor before = first.parameters[0].second.clone();
  std::atomic<bool> peer_pushed{false};
  std::thread peer([&] {
    absl::SleepFor(absl::Milliseconds(200));
    WorkerRun& second = runs[1];
    for (auto& [name, p] : second.parameters)
      p.mutable_grad() = Gradient(p, 1, 0);
    peer_pushed = true;
    second.status = second.sync->Step();  // Without overlap: pulls here.
  });
  ASSERT_TRUE(first.sync->AwaitParameter(0).ok());
  EXPECT_TRUE(peer_pushed.load());
  peer.join();
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  ASSERT_TRUE(first.sync->AwaitWeights().ok());
  EXPECT_FALSE(torch::equal(before, first.parameters[0].second));
  for (size_t i = 0; i < first.parameters.size(); ++i) {
    EXPECT_TRUE(
        torch::equal(first.parameters[i].second, runs[1].parameters[i].second))
        << first.parameters[i].first;
  }
  EXPECT_GE(first.sync->stats().pull_wait_seconds, 0.1);
  EXPECT_EQ(first.sync->AwaitParameter(2).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParameterSyncTest, GradientReadyRefusesMisuse) {
  auto sync = ParameterSync::Create(
      Options(0, "none", false),
      std::make_unique<FakePsClient>(FakePsClient::MakeShards(1)));
  ASSERT_TRUE(sync.ok());
  EXPECT_EQ((*sync)->GradientReady(0).code(),
            absl::StatusCode::kFailedPrecondition);
  ParameterSync::NamedTensors parameters = MakeParameters();
  ASSERT_TRUE((*sync)->Register(parameters).ok());
  EXPECT_EQ((*sync)->GradientReady(2).code(),
            absl::StatusCode::kInvalidArgument);
  for (auto& [name, p] : parameters) p.mutable_grad() = torch::ones_like(p);
  ASSERT_TRUE((*sync)->GradientReady(1).ok());
  const absl::Status twice = (*sync)->GradientReady(1);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.message().find("b"), std::string::npos) << twice;
}

TEST(ParameterSyncTest, RejectsParametersItCannotShare) {
  auto sync = ParameterSync::Create(
      Options(0, "none", false),
      std::make_unique<FakePsClient>(FakePsClient::MakeShards(1)));
  ASSERT_TRUE(sync.ok());
  absl::Status s = (*sync)->Register(
      ParameterSync::NamedTensors{{"d", torch::zeros({4}, torch::kFloat64)}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("parameter d"), std::string::npos) << s;
  EXPECT_EQ((*sync)->Step().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ParameterSyncTest, RejectsBadOptions) {
  SyncOptions options = Options(2, "none", false);
  EXPECT_EQ(ParameterSync::Create(options, std::make_unique<FakePsClient>(
                                               FakePsClient::MakeShards(1)))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  options = Options(0, "nosuch", false);
  EXPECT_FALSE(ParameterSync::Create(options, std::make_unique<FakePsClient>(
                                                  FakePsClient::MakeShards(1)))
                   .ok());
}

// Retries: one worker alone (num_workers 1) whose push or pull of step
// kFailedStep fails once, and which calls Step() again, as the API says.
enum class Failure { kNone, kPushLost, kPushDelivered, kPull };

struct RetryCase {
  std::string name;
  std::string compressor;
  float worker_momentum = 0.0f;
  float dgc_momentum = 0.0f;
  bool deltas = false;
  bool overlap = false;
  bool pull_ahead = false;
};

constexpr uint64_t kFailedStep = 1;
constexpr uint64_t kRetrySteps = 4;

struct RetryRun {
  ParameterSync::NamedTensors parameters = MakeParameters();
  std::vector<std::string> states;  // SaveState() after each step.
  int failed_steps = 0;
};

RetryRun RunWithRetry(const RetryCase& c, Failure failure) {
  RetryRun run;
  SyncOptions options = Options(0, c.compressor, c.deltas, c.worker_momentum);
  options.num_workers = 1;
  options.compressor.dgc.momentum = c.dgc_momentum;
  options.pull_ahead = c.pull_ahead;
  auto client = std::make_unique<FakePsClient>(FakePsClient::MakeShards(2));
  FakePsClient* fake = client.get();
  auto sync = ParameterSync::Create(options, std::move(client));
  if (!sync.ok()) {
    ADD_FAILURE() << sync.status();
    return run;
  }
  if (absl::Status s = (*sync)->Register(run.parameters); !s.ok()) {
    ADD_FAILURE() << s;
    return run;
  }
  for (uint64_t step = 0; step < kRetrySteps; ++step) {
    absl::Status s;
    for (size_t i = 0; i < run.parameters.size() && s.ok(); ++i) {
      s = (*sync)->AwaitParameter(i);
    }
    for (auto& [name, p] : run.parameters)
      p.mutable_grad() = Gradient(p, 0, step);
    if (step == kFailedStep) {
      if (failure == Failure::kPushLost) fake->FailNextPushes(1, false);
      if (failure == Failure::kPushDelivered) fake->FailNextPushes(1, true);
      if (failure == Failure::kPull) fake->FailNextPulls(1);
    }
    for (size_t i = run.parameters.size() - 1; c.overlap && s.ok() && i > 0;
         --i) {
      s = (*sync)->GradientReady(i);
    }
    if (s.ok()) s = (*sync)->Step();
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      ++run.failed_steps;
      s = (*sync)->Step();  // The retry.
    }
    if (!s.ok()) {
      ADD_FAILURE() << "step " << step << ": " << s;
      return run;
    }
    absl::StatusOr<std::string> state = (*sync)->SaveState();
    if (!state.ok()) {
      ADD_FAILURE() << state.status();
      return run;
    }
    run.states.push_back(*std::move(state));
  }
  EXPECT_EQ((*sync)->step(), kRetrySteps);
  return run;
}

// A retried step compresses its gradient once: the residuals, velocities
// and weights are those of a run without the failure, bit for bit.
TEST(ParameterSyncTest, RetriedStepCountsTheGradientOnce) {
  const std::vector<RetryCase> cases = {
      {"topk+worker momentum", "topk", 0.5f, 0.0f, /*deltas=*/true},
      {"dgc+momentum", "dgc", 0.0f, 0.9f},
      {"topk overlap", "topk", 0.0f, 0.0f, false, /*overlap=*/true},
      {"topk overlap pull ahead+worker momentum", "topk", 0.5f, 0.0f, true,
       /*overlap=*/true, /*pull_ahead=*/true},
  };
  for (const RetryCase& c : cases) {
    const RetryRun clean = RunWithRetry(c, Failure::kNone);
    ASSERT_EQ(clean.states.size(), kRetrySteps) << c.name;
    EXPECT_EQ(clean.failed_steps, 0) << c.name;
    for (const Failure failure :
         {Failure::kPushLost, Failure::kPushDelivered, Failure::kPull}) {
      // With pull ahead a failed pull is not Step()'s to retry.
      if (c.pull_ahead && failure == Failure::kPull) continue;
      const std::string what =
          c.name + " failure " + std::to_string(static_cast<int>(failure));
      const RetryRun retried = RunWithRetry(c, failure);
      ASSERT_EQ(retried.states.size(), kRetrySteps) << what;
      EXPECT_EQ(retried.failed_steps, 1) << what;
      for (uint64_t step = 0; step < kRetrySteps; ++step) {
        EXPECT_TRUE(retried.states[step] == clean.states[step])
            << what << ": compression state after step " << step;
      }
      for (size_t i = 0; i < clean.parameters.size(); ++i) {
        EXPECT_TRUE(torch::equal(retried.parameters[i].second,
                                 clean.parameters[i].second))
            << what << ": " << clean.parameters[i].first;
      }
    }
  }
}

}  // namespace
}  // namespace gradwire

namespace gradwire {
namespace {

// SetKeepWeightsInGradients: after a step, every gradient holds the weights
// of before its pulls, also when the step was retried after a failed pull;
// pull ahead is refused beside it.
TEST(ParameterSyncTest, KeptWeightsAreTheWeightsOfBeforeThePulls) {
  auto shards = FakePsClient::MakeShards(2);
  SyncOptions options = Options(0, "none", /*deltas=*/false);
  options.num_workers = 1;
  auto client = std::make_unique<FakePsClient>(shards);
  FakePsClient* fake = client.get();
  auto sync = ParameterSync::Create(options, std::move(client));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ParameterSync::NamedTensors parameters = MakeParameters();
  ASSERT_TRUE((*sync)->Register(parameters).ok());
  ASSERT_TRUE((*sync)->SetKeepWeightsInGradients(true).ok());
  EXPECT_EQ((*sync)->SetPullAhead(true).code(),
            absl::StatusCode::kFailedPrecondition);
  for (uint64_t step = 0; step < 2; ++step) {
    std::vector<torch::Tensor> before;
    for (auto& [name, p] : parameters) {
      before.push_back(p.clone());
      p.mutable_grad() = Gradient(p, 0, step);
    }
    if (step == 1) {
      // The first attempt's pull fails after the pushes: Step() again.
      fake->FailNextPulls(1);
      EXPECT_FALSE((*sync)->Step().ok());
    }
    ASSERT_TRUE((*sync)->Step().ok()) << "step " << step;
    for (size_t i = 0; i < parameters.size(); ++i) {
      const torch::Tensor& p = parameters[i].second;
      EXPECT_TRUE(torch::equal(p.grad(), before[i])) << "step " << step;
      // SGD on one worker's gradient: the weights moved.
      EXPECT_FALSE(torch::equal(p, before[i]));
    }
  }
}

TEST(ParameterSyncTest, RestoredResidualsAreThoseOfBeforeTheStep) {
  SyncOptions options = Options(0, "topk", /*deltas=*/false);
  options.num_workers = 1;
  auto sync = ParameterSync::Create(
      options, std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ParameterSync::NamedTensors parameters = MakeParameters();
  ASSERT_TRUE((*sync)->Register(parameters).ok());
  EXPECT_EQ((*sync)->RestoreResiduals().status().code(),
            absl::StatusCode::kFailedPrecondition);
  const auto step = [&](uint64_t n) {
    for (auto& [name, p] : parameters) p.mutable_grad() = Gradient(p, 0, n);
    return (*sync)->Step();
  };
  // A job's first step: the residuals were empty, so no copy is needed.
  ASSERT_TRUE(step(0).ok());
  EXPECT_GT((*sync)->ResidualNorm(), 0);
  auto restored = (*sync)->RestoreResiduals();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, 0);
  EXPECT_EQ((*sync)->ResidualNorm(), 0);
  // Kept: the residuals after a step and its undoing are those of before.
  ASSERT_TRUE(step(1).ok());
  const double before = (*sync)->ResidualNorm();
  ASSERT_TRUE((*sync)->SetKeepResiduals(true).ok());
  ASSERT_TRUE(step(2).ok());
  EXPECT_NE((*sync)->ResidualNorm(), before);
  restored = (*sync)->RestoreResiduals();
  ASSERT_TRUE(restored.ok() && *restored == 0);
  EXPECT_EQ((*sync)->ResidualNorm(), before);
  // Not kept: every compressed chunk is reported, and nothing changes.
  ASSERT_TRUE((*sync)->SetKeepResiduals(false).ok());
  ASSERT_TRUE(step(3).ok());
  const double after = (*sync)->ResidualNorm();
  restored = (*sync)->RestoreResiduals();
  ASSERT_TRUE(restored.ok());
  EXPECT_GT(*restored, 0);
  EXPECT_EQ((*sync)->ResidualNorm(), after);
}

}  // namespace
}  // namespace gradwire
