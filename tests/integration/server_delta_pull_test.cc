// Delta pulls through a real gradwire-server: the shard sends Top-K deltas of
// w - shadow with server-side error feedback. A client that applies them
// holds exactly the shard's shadow; what it lacks of the true weights is the
// not-yet-sent remainder, which drains once the weights stop moving. A
// server restarted from its checkpoint without the log is a new history
// epoch: the client's first pull after it is dense.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

constexpr double kPullRatio = 0.05;

struct Replica {
  uint64_t version = 0;
  std::vector<float> weights;
};

class ServerDeltaPullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    v1::TrainingConfig config = SgdConfig(1, v1::CONSISTENCY_MODE_BSP);
    config.mutable_pull_encoding()->set_compressor("topk");
    config.mutable_pull_encoding()->set_ratio(kPullRatio);
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    const grpc::Status s =
        stub_->Init(&context, MakeInit(config, chunks_, 0), &response);
    ASSERT_TRUE(s.ok()) << ToAbsl(s);
    CompressorOptions options;
    options.name = "topk";
    options.ratio = kPullRatio;
    pull_compressor_ = *MakeCompressor(options);
    for (const TestChunk& chunk : chunks_) {
      replicas_[chunk.key] = {0, chunk.initial};
    }
    // The client holds no history epoch yet: its first answer is dense (the
    // initial weights) and names the server's epoch.
    EXPECT_TRUE(PullDeltas(0).empty());
    EXPECT_NE(epoch_, 0u);
  }

  virtual std::vector<std::string> ServerArgs() const {
    return {"--mode=bsp", "--num-workers=1"};
  }

  void StartServer() {
    auto server = ServerProcess::Start(ServerArgs());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
  }

  void PushDense(uint64_t step,
                 const std::map<uint64_t, std::vector<float>>& gradients) {
    v1::PushRequest request;
    request.set_worker_id(0);
    request.set_step(step);
    for (const auto& [key, gradient] : gradients) {
      v1::ChunkGradient* chunk = request.add_chunks();
      chunk->set_key(key);
      *chunk->mutable_gradient() = DenseData(gradient);
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub_->Push(&context, request, &response);
    ASSERT_TRUE(s.ok()) << ToAbsl(s);
  }

  // Pulls with allow_delta from the replica's version and history epoch and
  // applies the answer, keeping its epoch. Returns the decoded delta of each
  // chunk that came as one.
  std::map<uint64_t, std::vector<float>> PullDeltas(uint64_t min_step) {
    v1::PullRequest request;
    request.set_worker_id(0);
    request.set_allow_delta(true);
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkPull* pull = request.add_chunks();
      pull->set_key(chunk.key);
      pull->set_have_version(replicas_[chunk.key].version);
      pull->set_have_epoch(epoch_);
      pull->set_min_step(min_step);
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PullResponse response;
    const grpc::Status s = stub_->Pull(&context, request, &response);
    EXPECT_TRUE(s.ok()) << ToAbsl(s);
    std::map<uint64_t, std::vector<float>> deltas;
    for (const v1::ChunkWeights& answer : response.chunks()) {
      Replica& replica = replicas_[answer.key()];
      DecodeOptions options;
      options.expected_numel = replica.weights.size();
      CompressedChunk decoded;
      EXPECT_TRUE(DecodeChunk(answer.data(), options, &decoded).ok());
      if (answer.is_delta()) {
        AccumulateInto(decoded, 1.0f, absl::MakeSpan(replica.weights));
        deltas[answer.key()].assign(replica.weights.size(), 0.0f);
        DecompressInto(decoded, absl::MakeSpan(deltas[answer.key()]));
      } else {
        replica.weights = decoded.values;
      }
      replica.version = answer.version();
    }
    epoch_ = response.history_epoch();
    return deltas;
  }

  // What the shard's delta from `replica` to `truth` must be:
  // TopK(truth - replica), decompressed.
  std::vector<float> ExpectedDelta(uint64_t key,
                                   const std::vector<float>& truth,
                                   const std::vector<float>& replica) {
    std::vector<float> difference(truth.size());
    for (size_t i = 0; i < truth.size(); ++i) {
      difference[i] = truth[i] - replica[i];
    }
    CompressedChunk delta;
    EXPECT_TRUE(pull_compressor_->Compress(difference, {key, 0}, &delta).ok());
    std::vector<float> dense(truth.size(), 0.0f);
    DecompressInto(delta, absl::MakeSpan(dense));
    return dense;
  }

  // One step: push `gradients`, pull deltas, and check the replica against
  // the shard's shadow and the delta against the reference weights.
  void Step(uint64_t step,
            const std::map<uint64_t, std::vector<float>>& gradients) {
    ASSERT_NO_FATAL_FAILURE(PushDense(step, gradients));
    for (const auto& [key, gradient] : gradients) {
      reference_.AddPush(key, gradient);
    }
    reference_.FinishStep();
    std::map<uint64_t, std::vector<float>> before;
    for (const auto& [key, replica] : replicas_) before[key] = replica.weights;
    const auto deltas = PullDeltas(step + 1);
    // The shard's dense answer when deltas are on is its shadow: what every
    // worker holds.
    auto shadow = PullDense(stub_.get(), 0, chunks_, step + 1);
    ASSERT_TRUE(shadow.ok()) << shadow.status();
    for (const TestChunk& chunk : chunks_) {
      const Replica& replica = replicas_[chunk.key];
      ASSERT_EQ(deltas.count(chunk.key), 1u)
          << "chunk " << chunk.key << " came dense at step " << step;
      EXPECT_EQ(replica.version, step + 1);
      EXPECT_TRUE(replica.weights == shadow->at(chunk.key))
          << "replica differs from the shadow, chunk " << chunk.key;
      const std::vector<float>& delta = deltas.at(chunk.key);
      const std::vector<float> expected = ExpectedDelta(
          chunk.key, reference_.weights(chunk.key), before[chunk.key]);
      EXPECT_LE(MaxRelativeDifference(delta, expected), 1e-5)
          << "step " << step << " chunk " << chunk.key;
      EXPECT_EQ(std::count(delta.begin(), delta.end(), 0.0f),
                std::count(expected.begin(), expected.end(), 0.0f));
    }
  }

  double MaxDistanceToReference() const {
    double worst = 0.0;
    for (const auto& [key, replica] : replicas_) {
      worst = std::max(worst, MaxRelativeDifference(replica.weights,
                                                    reference_.weights(key)));
    }
    return worst;
  }

  std::vector<TestChunk> chunks_ = MakeChunks({1000, 777}, /*seed=*/11);
  DenseReference reference_{chunks_, 1};
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  std::unique_ptr<Compressor> pull_compressor_;
  std::map<uint64_t, Replica> replicas_;
  // History epoch of the last answer (every chunk comes from one server).
  uint64_t epoch_ = 0;
};

TEST_F(ServerDeltaPullTest, ReplicaEqualsShadowAndCatchesUpWhenUpdatesStop) {
  uint64_t step = 0;
  for (; step < 6; ++step) {
    std::map<uint64_t, std::vector<float>> gradients;
    for (const TestChunk& chunk : chunks_) {
      gradients[chunk.key] =
          RandomValues(chunk.initial.size(), 1000 * step + chunk.key);
    }
    ASSERT_NO_FATAL_FAILURE(Step(step, gradients));
  }
  // Only 5% of the elements move per pull, so the replica lags the weights.
  const double lag = MaxDistanceToReference();
  EXPECT_GT(lag, 1e-3);

  // Zero gradients leave the weights alone; each update still sends the
  // largest 5% of what is left, so after 1 / 5% updates (plus slack for
  // rounding) everything has gone out.
  for (int drain = 0; drain < 25; ++drain, ++step) {
    std::map<uint64_t, std::vector<float>> zeros;
    for (const TestChunk& chunk : chunks_) {
      zeros[chunk.key].assign(chunk.initial.size(), 0.0f);
    }
    ASSERT_NO_FATAL_FAILURE(Step(step, zeros));
  }
  EXPECT_LE(MaxDistanceToReference(), 1e-6) << "lag before draining: " << lag;
}

TEST_F(ServerDeltaPullTest, WorkerThatFellBehindGetsTheShadowDense) {
  for (uint64_t step = 0; step < 3; ++step) {
    std::map<uint64_t, std::vector<float>> gradients;
    for (const TestChunk& chunk : chunks_) {
      gradients[chunk.key] = RandomValues(chunk.initial.size(), 77 + step);
    }
    ASSERT_NO_FATAL_FAILURE(PushDense(step, gradients));
  }
  // The replica still holds version 0, three behind: no delta fits.
  const auto deltas = PullDeltas(3);
  EXPECT_TRUE(deltas.empty());
  auto shadow = PullDense(stub_.get(), 0, chunks_, 3);
  ASSERT_TRUE(shadow.ok()) << shadow.status();
  for (const TestChunk& chunk : chunks_) {
    EXPECT_EQ(replicas_[chunk.key].version, 3u);
    EXPECT_TRUE(replicas_[chunk.key].weights == shadow->at(chunk.key));
  }
}

// Checkpoints without the write-ahead log: a restarted server resumes at
// the checkpoint's versions, which a client may hold from the run before.
class ServerDeltaPullRestartTest : public ServerDeltaPullTest {
 protected:
  std::vector<std::string> ServerArgs() const override {
    // An idle channel holds a graceful shutdown until it next polls: keep the
    // grace short.
    return {"--mode=bsp", "--num-workers=1",
            "--checkpoint-dir=" + checkpoints_.path(), "--wal=false",
            "--shutdown-grace-seconds=2"};
  }

  TempDir checkpoints_;
};

TEST_F(ServerDeltaPullRestartTest, RestartedServerAnswersDenseToTheOldEpoch) {
  for (uint64_t step = 0; step < 2; ++step) {
    std::map<uint64_t, std::vector<float>> gradients;
    for (const TestChunk& chunk : chunks_) {
      gradients[chunk.key] = RandomValues(chunk.initial.size(), 300 + step);
    }
    ASSERT_NO_FATAL_FAILURE(Step(step, gradients));
  }
  const uint64_t old_epoch = epoch_;
  stub_.reset();
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(absl::Seconds(10)).value_or(-1), 0)
      << server_->Stderr();
  ASSERT_NO_FATAL_FAILURE(StartServer());

  // The restored server is at version 2, the version the client holds; in
  // another history, so the answer is dense, not "already current".
  EXPECT_TRUE(PullDeltas(2).empty());
  EXPECT_NE(epoch_, old_epoch);
  EXPECT_NE(epoch_, 0u);
  auto shadow = PullDense(stub_.get(), 0, chunks_, 2);
  ASSERT_TRUE(shadow.ok()) << shadow.status();
  for (const TestChunk& chunk : chunks_) {
    EXPECT_EQ(replicas_[chunk.key].version, 2u);
    EXPECT_TRUE(replicas_[chunk.key].weights == shadow->at(chunk.key));
  }
  // In the new epoch the client is current, and deltas resume.
  EXPECT_EQ(PullDeltas(2).size(), chunks_.size());
  std::map<uint64_t, std::vector<float>> gradients;
  for (const TestChunk& chunk : chunks_) {
    gradients[chunk.key] = RandomValues(chunk.initial.size(), 302);
  }
  ASSERT_NO_FATAL_FAILURE(Step(2, gradients));
}

}  // namespace
}  // namespace gradwire::testing
