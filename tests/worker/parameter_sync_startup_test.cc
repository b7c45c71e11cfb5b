// ParameterSync's start-up against in-memory shards: workers that start
// from the same values send one copy of them per shard and pull none back;
// a worker that starts from other values pulls the shards' and ends
// identical to the others.
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_ps_client.h"
#include "worker/parameter_sync.h"

namespace gradwire {
namespace {

using testing::FakePsClient;

// 2 x 2048 floats in chunks of 512: 8 chunks over 2 shards.
constexpr int64_t kNumel = 2048;
constexpr uint64_t kModelBytes = 2 * kNumel * sizeof(float);

SyncOptions Options(uint32_t worker_id, bool deltas) {
  SyncOptions options;
  options.client.worker_id = worker_id;
  options.num_workers = 2;
  options.compressor.name = "topk";
  options.compressor.ratio = 0.25;
  options.partition_bytes = 2048;
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(0.1f);
  options.pull_deltas = deltas;
  options.push_bucket_bytes = 0;
  if (deltas) {
    options.training.mutable_pull_encoding()->set_compressor("topk");
    options.training.mutable_pull_encoding()->set_ratio(0.25);
  }
  return options;
}

// The model's initial values; `seed` 0 and 1 differ in every element.
ParameterSync::NamedTensors MakeParameters(int seed) {
  torch::Tensor a =
      torch::arange(0, kNumel, torch::kFloat32).mul_(0.001).add_(seed);
  torch::Tensor b = torch::linspace(-1, 1, kNumel, torch::kFloat32).add_(seed);
  return {{"a", a}, {"b", b}};
}

struct Worker {
  explicit Worker(ParameterSync::NamedTensors initial)
      : parameters(std::move(initial)) {}
  ParameterSync::NamedTensors parameters;
  std::unique_ptr<ParameterSync> sync;
  absl::Status status;
};

// Registers both workers (worker 1 only after worker 0 is registered when
// `in_order`, else at once) and runs `steps` BSP steps with the same
// gradients on both.
void RunWorkers(uint32_t steps, bool deltas, bool in_order, Worker* workers) {
  const auto shards = FakePsClient::MakeShards(2);
  absl::Notification first_registered;
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      Worker& worker = workers[w];
      auto sync = ParameterSync::Create(Options(w, deltas),
                                        std::make_unique<FakePsClient>(shards));
      if (!sync.ok()) {
        worker.status = sync.status();
        if (w == 0) first_registered.Notify();
        return;
      }
      worker.sync = *std::move(sync);
      if (w == 1 && in_order) first_registered.WaitForNotification();
      worker.status = worker.sync->Register(worker.parameters);
      if (w == 0) first_registered.Notify();
      for (uint32_t step = 0; step < steps && worker.status.ok(); ++step) {
        for (auto& [name, p] : worker.parameters) {
          p.mutable_grad() = torch::full_like(p, 0.01f * (step + 1));
        }
        worker.status = worker.sync->Step();
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

bool Identical(const Worker& a, const Worker& b) {
  for (size_t i = 0; i < a.parameters.size(); ++i) {
    if (!torch::equal(a.parameters[i].second, b.parameters[i].second)) {
      return false;
    }
  }
  return true;
}

TEST(ParameterSyncStartupTest, SameValuesTravelOncePerShard) {
  Worker workers[2] = {Worker(MakeParameters(0)), Worker(MakeParameters(0))};
  RunWorkers(/*steps=*/0, /*deltas=*/false, /*in_order=*/false, workers);
  uint64_t sent = 0;
  for (const Worker& worker : workers) {
    ASSERT_TRUE(worker.status.ok()) << worker.status;
    const SyncStats stats = worker.sync->stats();
    // Nothing pulled back: the fingerprints matched.
    EXPECT_EQ(stats.pulled_bytes, 0u);
    EXPECT_LT(stats.startup_bytes_received, kModelBytes / 10);
    EXPECT_GT(stats.startup_seconds, 0.0);
    sent += stats.startup_bytes_sent;
  }
  // One copy of the model in all (sending values from every worker would
  // be two).
  EXPECT_GE(sent, kModelBytes);
  EXPECT_LT(sent, kModelBytes * 5 / 4);
}

TEST(ParameterSyncStartupTest, SameValuesStayInStepWithDeltas) {
  // The skipped pull leaves each chunk at the shard's version and epoch, so
  // the first steps' pulls are deltas that apply to it.
  Worker workers[2] = {Worker(MakeParameters(0)), Worker(MakeParameters(0))};
  RunWorkers(/*steps=*/3, /*deltas=*/true, /*in_order=*/false, workers);
  ASSERT_TRUE(workers[0].status.ok()) << workers[0].status;
  ASSERT_TRUE(workers[1].status.ok()) << workers[1].status;
  EXPECT_TRUE(Identical(workers[0], workers[1]));
  // Three steps of deltas cost less than one dense pull of the model.
  EXPECT_LT(workers[1].sync->stats().pulled_bytes, kModelBytes);
}

TEST(ParameterSyncStartupTest, OtherValuesArePulledAndEndIdentical) {
  Worker workers[2] = {Worker(MakeParameters(0)), Worker(MakeParameters(1))};
  RunWorkers(/*steps=*/2, /*deltas=*/true, /*in_order=*/true, workers);
  ASSERT_TRUE(workers[0].status.ok()) << workers[0].status;
  ASSERT_TRUE(workers[1].status.ok()) << workers[1].status;
  const SyncStats first = workers[0].sync->stats();
  const SyncStats second = workers[1].sync->stats();
  EXPECT_GE(first.startup_bytes_sent, kModelBytes);
  EXPECT_LT(first.startup_bytes_received, kModelBytes / 10);
  // Worker 1 sent no values and pulled the whole model.
  EXPECT_LT(second.startup_bytes_sent, kModelBytes / 10);
  EXPECT_GE(second.startup_bytes_received, kModelBytes);
  EXPECT_TRUE(Identical(workers[0], workers[1]));
}

TEST(ParameterSyncStartupTest, OtherValuesWithoutStepsMatchTheFirst) {
  Worker workers[2] = {Worker(MakeParameters(0)), Worker(MakeParameters(1))};
  RunWorkers(/*steps=*/0, /*deltas=*/false, /*in_order=*/true, workers);
  ASSERT_TRUE(workers[1].status.ok()) << workers[1].status;
  EXPECT_TRUE(Identical(workers[0], workers[1]));
  const ParameterSync::NamedTensors initial = MakeParameters(0);
  EXPECT_TRUE(torch::equal(workers[1].parameters[0].second, initial[0].second));
}

}  // namespace
}  // namespace gradwire
