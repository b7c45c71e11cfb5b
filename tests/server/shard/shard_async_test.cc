// ASP and SSP on the shard's sparse paths: a sparse push under plain SGD
// touches only its selected weights (and gives the dense rule's result bit
// for bit), under momentum the dense rule runs; on a shard set to per-worker
// deltas, pulls are answered with compressed deltas from per-worker
// replicas, within their memory budget (shared deltas:
// shard_published_pull_test.cc).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "server/shard/worker_replicas.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

constexpr uint64_t kNumel = 64;
// Pushes and pull deltas keep a quarter of the chunk.
constexpr double kRatio = 0.25;
constexpr uint64_t kKept = 16;

std::vector<ChunkSpec> OneChunk(std::vector<float> initial) {
  return {{kKeyA, std::move(initial)}};
}

// The elements of `after` that differ from `before`, bit for bit.
std::vector<uint64_t> Changed(const std::vector<float>& before,
                              const std::vector<float>& after) {
  std::vector<uint64_t> changed;
  for (uint64_t i = 0; i < before.size(); ++i) {
    if (before[i] != after[i]) changed.push_back(i);
  }
  return changed;
}

// The selected positions of a Top-K push of `g`.
std::vector<uint64_t> Selected(const v1::ChunkData& data) {
  const std::vector<float> dense = Decoded(data, kNumel);
  std::vector<uint64_t> selected;
  for (uint64_t i = 0; i < dense.size(); ++i) {
    if (dense[i] != 0.0f) selected.push_back(i);
  }
  return selected;
}

// ------------------------------------------------- sparse ASP/SSP pushes

TEST(ShardSparseApplyTest, SgdMovesOnlyTheSelectedWeightsAsTheDenseRule) {
  const std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  auto sparse =
      StartShard(Config(1, v1::CONSISTENCY_MODE_ASP), OneChunk(initial));
  auto dense =
      StartShard(Config(1, v1::CONSISTENCY_MODE_ASP), OneChunk(initial));
  std::vector<float> before = initial;
  for (uint64_t step = 0; step < 4; ++step) {
    const v1::ChunkData pushed =
        CompressedData("topk", Gradient(0, step, kNumel), kRatio);
    ASSERT_TRUE(pushed.has_sparse());
    // The same gradient, decompressed: the dense rule over the whole chunk.
    const std::vector<float> decompressed = Decoded(pushed, kNumel);
    EXPECT_EQ(
        PushOne(*sparse, PushRequest(0, step, {{kKeyA, pushed}})).version(),
        step + 1);
    PushOne(*dense, PushRequest(0, step, {{kKeyA, DenseData(decompressed)}}));

    const std::vector<float> after = Weights(*sparse, kKeyA, kNumel);
    EXPECT_EQ(after, Weights(*dense, kKeyA, kNumel)) << "step " << step;
    EXPECT_EQ(Changed(before, after), Selected(pushed)) << "step " << step;
    before = after;
  }
}

TEST(ShardSparseApplyTest, FrozenAdamMovesOnlyTheSelectedWeightsAsDense) {
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_ASP);
  v1::OptimizerConfig* adam = config.mutable_optimizer();
  adam->set_kind(v1::OPTIMIZER_KIND_ADAM);
  adam->set_momentum(0.9f);
  adam->set_beta2(0.999f);
  adam->set_epsilon(1e-8f);
  adam->set_freeze_variance_after(2);
  const std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  auto sparse = StartShard(config, OneChunk(initial));
  auto dense = StartShard(config, OneChunk(initial));
  std::vector<float> before = initial;
  for (uint64_t step = 0; step < 5; ++step) {
    const v1::ChunkData pushed =
        CompressedData("topk", Gradient(0, step, kNumel), kRatio);
    const std::vector<float> decompressed = Decoded(pushed, kNumel);
    PushOne(*sparse, PushRequest(0, step, {{kKeyA, pushed}}));
    PushOne(*dense, PushRequest(0, step, {{kKeyA, DenseData(decompressed)}}));
    const std::vector<float> after = Weights(*sparse, kKeyA, kNumel);
    EXPECT_EQ(after, Weights(*dense, kKeyA, kNumel)) << "step " << step;
    // Before the freeze Adam's moments move the weights of every earlier
    // gradient too.
    if (step == 1) {
      EXPECT_GT(Changed(before, after).size(), Selected(pushed).size());
    } else {
      EXPECT_EQ(Changed(before, after), Selected(pushed)) << "step " << step;
    }
    before = after;
  }
  EXPECT_EQ(sparse->StateDigest(), dense->StateDigest());
}

TEST(ShardSparseApplyTest, SspSparsePushAtAScheduledRate) {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_SSP, 2);
  // Warm-up: update u runs at lr * (u + 1) / 4.
  config.mutable_optimizer()->set_warmup_updates(4);
  const std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  auto shard = StartShard(config, OneChunk(initial));
  const std::vector<float> g = Gradient(1, 0, kNumel);
  const v1::ChunkData pushed = CompressedData("topk", g, kRatio);
  PushOne(*shard, PushRequest(0, 0, {{kKeyA, pushed}}));
  PushOne(*shard, PushRequest(1, 0, {{kKeyA, pushed}}));
  const std::vector<float> after = Weights(*shard, kKeyA, kNumel);
  const std::vector<float> values = Decoded(pushed, kNumel);
  for (uint64_t i = 0; i < kNumel; ++i) {
    // Two updates, at lr / 4 and lr / 2.
    const double expected =
        initial[i] - (kLearningRate * 0.25 + kLearningRate * 0.5) * values[i];
    EXPECT_NEAR(after[i], expected, kSgdTolerance) << "element " << i;
  }
}

TEST(ShardSparseApplyTest, OverflowingSparsePushIsRefusedUnchanged) {
  std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  initial[3] = 3e38f;
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_ASP);
  config.mutable_optimizer()->set_learning_rate(1.0f);
  auto shard = StartShard(config, OneChunk(initial));
  const uint64_t digest = shard->StateDigest();
  std::vector<float> g(kNumel, 0.0f);
  g[3] = -3e38f;
  g[9] = 1.0f;
  const v1::ChunkData pushed = CompressedData("topk", g, 2.0 / kNumel);
  ASSERT_TRUE(pushed.has_sparse());
  v1::PushResponse response;
  const absl::Status s =
      shard->Push(PushRequest(0, 0, {{kKeyA, pushed}}), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("not finite"));
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_EQ(Weights(*shard, kKeyA, kNumel), initial);
}

TEST(ShardSparseApplyTest, MomentumMovesEveryWeightItsBufferHolds) {
  // Momentum keeps stepping where a later gradient is zero: the dense rule.
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_ASP);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
  config.mutable_optimizer()->set_momentum(0.5f);
  auto shard = StartShard(config, OneChunk(InitialWeights(kKeyA, kNumel)));
  std::vector<float> first(kNumel, 0.0f), second(kNumel, 0.0f);
  first[1] = 1.0f;
  second[2] = 1.0f;
  PushOne(*shard,
          PushRequest(0, 0,
                      {{kKeyA, CompressedData("topk", first, 1.0 / kNumel)}}));
  const std::vector<float> before = Weights(*shard, kKeyA, kNumel);
  PushOne(*shard,
          PushRequest(0, 1,
                      {{kKeyA, CompressedData("topk", second, 1.0 / kNumel)}}));
  const std::vector<float> after = Weights(*shard, kKeyA, kNumel);
  EXPECT_EQ(Changed(before, after), (std::vector<uint64_t>{1, 2}));
  EXPECT_FLOAT_EQ(after[1], before[1] - kLearningRate * 0.5f);
}

// ------------------------------------------------ replica pulls (ASP/SSP)

// A shard that answers ASP/SSP pulls from per-worker replicas.
ShardOptions PerWorker() {
  ShardOptions options = Options();
  options.async_pull_deltas = AsyncPullDeltas::kPerWorker;
  return options;
}

v1::TrainingConfig ReplicaConfig(v1::ConsistencyMode mode,
                                 v1::ValueType values = v1::VALUE_TYPE_FP32) {
  v1::TrainingConfig config =
      Config(2, mode, mode == v1::CONSISTENCY_MODE_SSP ? 2 : 0);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(kRatio);
  config.mutable_pull_encoding()->set_value_type(values);
  return config;
}

// What one worker holds of chunk A.
struct Holder : DeltaHolder {
  Holder() : DeltaHolder(kKeyA, kNumel) {}
};

// `pushes` steps of worker 1 (Top-K of Gradient), starting at `first`.
void PushSteps(Shard& shard, uint64_t first, uint64_t pushes) {
  for (uint64_t step = first; step < first + pushes; ++step) {
    PushOne(
        shard,
        PushRequest(1, step,
                    {{kKeyA, CompressedData("topk", Gradient(1, step, kNumel),
                                            kRatio)}}));
  }
}

// A zero gradient of worker 1 at `step`: the weights stay, the version
// moves.
void PushZeros(Shard& shard, uint64_t step) {
  PushOne(
      shard,
      PushRequest(1, step,
                  {{kKeyA, CompressedData("topk", std::vector<float>(kNumel, 0),
                                          kRatio)}}));
}

TEST(ShardReplicaPullTest, AWorkerManyVersionsBehindGetsADelta) {
  auto shard = StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_ASP),
                          OneChunk(InitialWeights(kKeyA, kNumel)), PerWorker());
  Holder holder;
  EXPECT_FALSE(holder.Pull(*shard).is_delta());
  EXPECT_EQ(holder.weights, InitialWeights(kKeyA, kNumel));
  EXPECT_EQ(shard->replica_bytes(), kNumel * sizeof(float));

  PushSteps(*shard, 0, 5);
  const v1::ChunkWeights delta = holder.Pull(*shard);
  ASSERT_TRUE(delta.is_delta());
  EXPECT_EQ(delta.version(), 5u);
  ASSERT_TRUE(delta.data().has_sparse());
  EXPECT_EQ(delta.data().sparse().nnz(), kKept);
  // Nothing new: an empty delta.
  const v1::ChunkWeights current = holder.Pull(*shard);
  EXPECT_TRUE(current.is_delta());
  EXPECT_EQ(current.data().sparse().nnz(), 0u);

  // Error feedback: what the deltas left out goes out with later ones.
  // Zero pushes keep the weights and add versions; four deltas of a quarter
  // each carry the rest.
  const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
  EXPECT_NE(holder.weights, weights);
  for (uint64_t step = 5; step < 9; ++step) {
    PushZeros(*shard, step);
    EXPECT_TRUE(holder.Pull(*shard).is_delta());
  }
  EXPECT_EQ(Weights(*shard, kKeyA, kNumel), weights);
  for (uint64_t i = 0; i < kNumel; ++i) {
    EXPECT_NEAR(holder.weights[i], weights[i], 1e-6) << "element " << i;
  }
}

TEST(ShardReplicaPullTest, DeltaValuesGoOutInThePullPrecision) {
  auto shard =
      StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_ASP, v1::VALUE_TYPE_FP16),
                 OneChunk(InitialWeights(kKeyA, kNumel)), PerWorker());
  Holder holder;
  holder.Pull(*shard);
  PushSteps(*shard, 0, 3);
  const v1::ChunkWeights delta = holder.Pull(*shard);
  ASSERT_TRUE(delta.is_delta());
  EXPECT_EQ(delta.data().sparse().value_type(), v1::VALUE_TYPE_FP16);
  // The replica moved by the fp16 values: a second holder that pulls
  // dense and the first one's next delta agree with the weights in the
  // limit, the rounding kept by error feedback.
  for (uint64_t step = 3; step < 12; ++step) {
    PushZeros(*shard, step);
    holder.Pull(*shard);
  }
  const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
  for (uint64_t i = 0; i < kNumel; ++i) {
    EXPECT_NEAR(holder.weights[i], weights[i], 1e-3) << "element " << i;
  }
}

TEST(ShardReplicaPullTest, SspWorkerBehindGetsADelta) {
  auto shard = StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_SSP),
                          OneChunk(InitialWeights(kKeyA, kNumel)), PerWorker());
  Holder holder;
  holder.Pull(*shard);
  PushSteps(*shard, 0, 2);
  const v1::ChunkWeights delta = holder.Pull(*shard);
  EXPECT_TRUE(delta.is_delta());
  EXPECT_EQ(delta.version(), 2u);
}

TEST(ShardReplicaPullTest, AnAnswerTheWorkerLostCostsADenseOne) {
  auto shard = StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_ASP),
                          OneChunk(InitialWeights(kKeyA, kNumel)), PerWorker());
  Holder holder;
  holder.Pull(*shard);
  PushSteps(*shard, 0, 2);
  Holder lost = holder;
  ASSERT_TRUE(lost.Pull(*shard).is_delta());  // Never reaches `holder`.
  PushSteps(*shard, 2, 1);
  // `holder` names version 0, the replica is at 2: dense, then deltas.
  const v1::ChunkWeights answer = holder.Pull(*shard);
  EXPECT_FALSE(answer.is_delta());
  EXPECT_EQ(holder.weights, Weights(*shard, kKeyA, kNumel));
  PushSteps(*shard, 3, 1);
  EXPECT_TRUE(holder.Pull(*shard).is_delta());
  // Another history's version never gets a delta.
  holder.epoch ^= 1;
  PushSteps(*shard, 4, 1);
  EXPECT_FALSE(holder.Pull(*shard).is_delta());
}

TEST(ShardReplicaPullTest, ReplicasStayWithinTheirBudgetAndDropsFreeThem) {
  ShardOptions options = PerWorker();
  options.max_replica_bytes = kNumel * sizeof(float);  // One replica.
  auto shard = StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_ASP),
                          OneChunk(InitialWeights(kKeyA, kNumel)), options);
  Holder first, second;
  second.worker = 1;
  first.Pull(*shard);
  second.Pull(*shard);
  EXPECT_EQ(shard->replica_bytes(), kNumel * sizeof(float));
  PushSteps(*shard, 0, 2);
  EXPECT_TRUE(first.Pull(*shard).is_delta());
  // No room for the second: dense answers, still exact.
  EXPECT_FALSE(second.Pull(*shard).is_delta());
  EXPECT_EQ(second.weights, Weights(*shard, kKeyA, kNumel));
  EXPECT_EQ(shard->replica_bytes(), kNumel * sizeof(float));

  ASSERT_TRUE(shard->DropWorker(0).ok());
  EXPECT_EQ(shard->replica_bytes(), 0u);
  // The room is the second worker's now, from its next dense answer.
  PushSteps(*shard, 2, 1);
  EXPECT_FALSE(second.Pull(*shard).is_delta());
  EXPECT_EQ(shard->replica_bytes(), kNumel * sizeof(float));
  PushSteps(*shard, 3, 1);
  EXPECT_TRUE(second.Pull(*shard).is_delta());
}

TEST(ShardReplicaPullTest, BspStillSharesOneDeltaPerVersion) {
  auto shard = StartShard(ReplicaConfig(v1::CONSISTENCY_MODE_BSP),
                          OneChunk(InitialWeights(kKeyA, kNumel)), PerWorker());
  Holder holder;
  holder.Pull(*shard);
  EXPECT_EQ(shard->replica_bytes(), 0u);
}

// -------------------------------- the replica loan (worker_replicas.h)

// A chunk of kNumel weights at version 3 whose worker 1 holds a replica of
// zeros at version 3, and a Top-K compressor of kKept elements.
struct LoanFixture {
  LoanFixture() : chunk(Snapshot()), replicas(1 << 20) {
    CompressorOptions options;
    options.name = "topk";
    options.ratio = kRatio;
    compressor = std::move(*MakeCompressor(options));
    absl::MutexLock lock(&chunk.mu);
    replicas.Record(&chunk, 1);
    chunk.replicas[1].weights.assign(kNumel, 0.0f);
  }
  static ChunkSnapshot Snapshot() {
    ChunkSnapshot s;
    s.key = kKeyA;
    s.numel = kNumel;
    s.version = 3;
    s.weights = InitialWeights(kKeyA, kNumel);
    return s;
  }
  ChunkState chunk;
  WorkerReplicas replicas;
  std::unique_ptr<Compressor> compressor;
};

TEST(ReplicaLoanTest, TheReplicaMovesByWhatWasSent) {
  LoanFixture f;
  WorkerReplicas::Loan loan;
  {
    absl::MutexLock lock(&f.chunk.mu);
    ASSERT_TRUE(f.replicas.Lend(&f.chunk, 1, 3, &loan));
    // Lent once at a time, and only at the replica's version.
    WorkerReplicas::Loan other;
    EXPECT_FALSE(f.replicas.Lend(&f.chunk, 1, 3, &other));
    EXPECT_FALSE(f.replicas.Lend(&f.chunk, 2, 3, &other));
  }
  // The weights move while the delta is built: the loan keeps version 3.
  {
    absl::MutexLock lock(&f.chunk.mu);
    f.chunk.state.weights[0] += 100.0f;
    f.chunk.state.version = 4;
  }
  CompressedChunk delta;
  ASSERT_TRUE(WorkerReplicas::Build(*f.compressor, kKeyA, &loan, &delta));
  EXPECT_EQ(delta.indices.size(), kKept);
  absl::MutexLock lock(&f.chunk.mu);
  f.replicas.Return(&f.chunk, true, &loan);
  const WorkerReplica& replica = f.chunk.replicas[1];
  EXPECT_FALSE(replica.lent);
  EXPECT_EQ(replica.version, 3u);
  std::vector<float> sent(kNumel, 0.0f);
  DecompressInto(delta, absl::MakeSpan(sent));
  EXPECT_EQ(replica.weights, sent);
  // At version 3 again, so the next pull naming it gets a delta.
  WorkerReplicas::Loan next;
  EXPECT_TRUE(f.replicas.Lend(&f.chunk, 1, 3, &next));
}

TEST(ReplicaLoanTest, ADenseAnswerDuringTheLoanWins) {
  LoanFixture f;
  WorkerReplicas::Loan loan;
  {
    absl::MutexLock lock(&f.chunk.mu);
    ASSERT_TRUE(f.replicas.Lend(&f.chunk, 1, 3, &loan));
    f.chunk.state.version = 5;
    f.replicas.Record(&f.chunk, 1);
  }
  CompressedChunk delta;
  ASSERT_TRUE(WorkerReplicas::Build(*f.compressor, kKeyA, &loan, &delta));
  absl::MutexLock lock(&f.chunk.mu);
  f.replicas.Return(&f.chunk, true, &loan);
  EXPECT_EQ(f.chunk.replicas[1].version, 5u);
  EXPECT_EQ(f.chunk.replicas[1].weights, f.chunk.state.weights);
  EXPECT_EQ(f.replicas.bytes(), kNumel * sizeof(float));
}

TEST(ReplicaLoanTest, ForgetDuringTheLoanFreesItAndAFailedBuildToo) {
  LoanFixture f;
  WorkerReplicas::Loan loan;
  {
    absl::MutexLock lock(&f.chunk.mu);
    ASSERT_TRUE(f.replicas.Lend(&f.chunk, 1, 3, &loan));
    f.replicas.Forget(&f.chunk, 1);
    f.replicas.Return(&f.chunk, true, &loan);
    EXPECT_FALSE(f.chunk.replicas.contains(1));
    EXPECT_EQ(f.replicas.bytes(), 0u);
    // A replica whose delta was not built is freed.
    f.replicas.Record(&f.chunk, 1);
    ASSERT_TRUE(f.replicas.Lend(&f.chunk, 1, 3, &loan));
    f.replicas.Return(&f.chunk, false, &loan);
    EXPECT_FALSE(f.chunk.replicas.contains(1));
    EXPECT_EQ(f.replicas.bytes(), 0u);
  }
}

}  // namespace
}  // namespace gradwire
