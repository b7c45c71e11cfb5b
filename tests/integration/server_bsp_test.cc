// gradwire-server in BSP mode, driven over gRPC by real clients: sparse
// pushes train exactly like dense SGD, retries are exactly-once, and bad
// requests get the documented status codes.
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

constexpr int kSteps = 5;
constexpr uint32_t kWorkers = 2;

// What one worker pushed (decoded) and pulled, by step and chunk key.
struct WorkerLog {
  std::vector<std::map<uint64_t, std::vector<float>>> pushed;
  std::vector<std::map<uint64_t, std::vector<float>>> pulled;
};

grpc::Status Push(v1::ParameterServer::Stub* stub, uint32_t worker,
                  uint64_t step, const std::map<uint64_t, v1::ChunkData>& data,
                  v1::PushResponse* response) {
  v1::PushRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  for (const auto& [key, gradient] : data) {
    v1::ChunkGradient* chunk = request.add_chunks();
    chunk->set_key(key);
    *chunk->mutable_gradient() = gradient;
  }
  grpc::ClientContext context;
  SetTimeout(&context);
  return stub->Push(&context, request, response);
}

class ServerBspTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = {"--mode=bsp", "--num-workers=2"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
  }

  void InitAllWorkers() {
    for (uint32_t worker = 0; worker < kWorkers; ++worker) {
      grpc::ClientContext context;
      SetTimeout(&context);
      v1::InitResponse response;
      const grpc::Status s =
          stub_->Init(&context,
                      MakeInit(SgdConfig(kWorkers, v1::CONSISTENCY_MODE_BSP),
                               chunks_, worker),
                      &response);
      ASSERT_TRUE(s.ok()) << ToAbsl(s);
      EXPECT_EQ(response.initialized_now(), worker == 0);
      ASSERT_EQ(response.versions_size(), static_cast<int>(chunks_.size()));
    }
  }

  // One worker's training loop: gradient w - target, Top-K with error
  // feedback, push, then a pull that waits for the step to complete.
  void RunWorker(uint32_t worker, WorkerLog* log) {
    auto stub = server_->NewStub();
    CompressorOptions options;
    options.name = "topk";
    options.ratio = 0.1;
    auto compressor = MakeCompressor(options);
    ASSERT_TRUE(compressor.ok()) << compressor.status();
    std::map<uint64_t, std::vector<float>> weights, targets;
    std::map<uint64_t, FeedbackState> feedback;
    for (const TestChunk& chunk : chunks_) {
      weights[chunk.key] = chunk.initial;
      targets[chunk.key] =
          RandomValues(chunk.initial.size(), 100 + 10 * worker + chunk.key);
      feedback[chunk.key].Resize(chunk.initial.size(), false);
    }
    for (uint64_t step = 0; step < kSteps; ++step) {
      std::map<uint64_t, v1::ChunkData> pushed;
      log->pushed.emplace_back();
      for (const TestChunk& chunk : chunks_) {
        std::vector<float> gradient(chunk.initial.size());
        for (size_t i = 0; i < gradient.size(); ++i) {
          gradient[i] = weights[chunk.key][i] - targets[chunk.key][i];
        }
        CompressedChunk compressed;
        ASSERT_TRUE((*compressor)
                        ->CompressWithFeedback(gradient, {chunk.key, step},
                                               &feedback[chunk.key],
                                               &compressed)
                        .ok());
        ASSERT_TRUE(EncodeChunk(compressed, &pushed[chunk.key]).ok());
        ASSERT_EQ(compressed.values.size(),
                  static_cast<size_t>(std::llround(0.1 * gradient.size())));
        auto decoded = DecodeToDense(pushed[chunk.key], gradient.size());
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        log->pushed.back()[chunk.key] = *decoded;
      }
      v1::PushResponse ack;
      const grpc::Status s = Push(stub.get(), worker, step, pushed, &ack);
      ASSERT_TRUE(s.ok()) << ToAbsl(s);
      for (const v1::ChunkAck& chunk_ack : ack.acks()) {
        EXPECT_FALSE(chunk_ack.duplicate());
      }
      auto pulled = PullDense(stub.get(), worker, chunks_, step + 1);
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      weights = *pulled;
      log->pulled.push_back(*pulled);
    }
  }

  std::vector<TestChunk> chunks_ = MakeChunks({1000, 777}, /*seed=*/7);
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(ServerBspTest, SparsePushesOfTwoWorkersTrainLikeDenseSgd) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  WorkerLog logs[kWorkers];
  std::thread first([&] { RunWorker(0, &logs[0]); });
  std::thread second([&] { RunWorker(1, &logs[1]); });
  first.join();
  second.join();
  ASSERT_FALSE(HasFailure());

  DenseReference reference(chunks_, kWorkers);
  for (int step = 0; step < kSteps; ++step) {
    for (const WorkerLog& log : logs) {
      for (const auto& [key, gradient] : log.pushed[step]) {
        reference.AddPush(key, gradient);
      }
    }
    reference.FinishStep();
    for (const WorkerLog& log : logs) {
      for (const TestChunk& chunk : chunks_) {
        EXPECT_LE(MaxRelativeDifference(log.pulled[step].at(chunk.key),
                                        reference.weights(chunk.key)),
                  1e-5)
            << "step " << step << " chunk " << chunk.key;
      }
    }
  }
  // The run moved the weights, so the comparison above was not vacuous.
  EXPECT_GT(MaxRelativeDifference(reference.weights(0), chunks_[0].initial),
            1e-3);
}

TEST_F(ServerBspTest, RetriedPushIsAcknowledgedAsDuplicateAndNotApplied) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  const std::vector<float> g0 = RandomValues(1000, 1),
                           g1 = RandomValues(1000, 2);
  v1::PushResponse ack;
  ASSERT_TRUE(Push(stub_.get(), 0, 0, {{0, DenseData(g0)}}, &ack).ok());
  EXPECT_FALSE(ack.acks(0).duplicate());
  ASSERT_TRUE(Push(stub_.get(), 0, 0, {{0, DenseData(g0)}}, &ack).ok());
  EXPECT_TRUE(ack.acks(0).duplicate());
  EXPECT_EQ(ack.acks(0).version(), 0u);
  ASSERT_TRUE(Push(stub_.get(), 1, 0, {{0, DenseData(g1)}}, &ack).ok());
  EXPECT_FALSE(ack.acks(0).duplicate());
  EXPECT_EQ(ack.acks(0).version(), 1u);
  const std::vector<TestChunk> first_chunk = {chunks_[0]};
  auto after_step = PullDense(stub_.get(), 0, first_chunk, 1);
  ASSERT_TRUE(after_step.ok()) << after_step.status();

  // Retries of both workers, one with a different payload: all duplicates.
  ASSERT_TRUE(Push(stub_.get(), 0, 0, {{0, DenseData(g0)}}, &ack).ok());
  EXPECT_TRUE(ack.acks(0).duplicate());
  ASSERT_TRUE(Push(stub_.get(), 1, 0, {{0, DenseData(g0)}}, &ack).ok());
  EXPECT_TRUE(ack.acks(0).duplicate());
  EXPECT_EQ(ack.acks(0).version(), 1u);
  auto after_retries = PullDense(stub_.get(), 0, first_chunk, 1);
  ASSERT_TRUE(after_retries.ok()) << after_retries.status();
  EXPECT_EQ(after_retries->at(0), after_step->at(0));

  DenseReference reference(first_chunk, kWorkers);
  reference.AddPush(0, g0);
  reference.AddPush(0, g1);
  reference.FinishStep();
  EXPECT_LE(MaxRelativeDifference(after_step->at(0), reference.weights(0)),
            1e-5);
}

TEST_F(ServerBspTest, PullOfAStepNobodyPushedMissesItsDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  const absl::Time start = absl::Now();
  auto pulled = PullDense(stub_.get(), 0, chunks_, /*min_step=*/1,
                          absl::Milliseconds(300));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded)
      << pulled.status();
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Seconds(5));
  // Step 0 needs no wait.
  EXPECT_TRUE(PullDense(stub_.get(), 0, chunks_, 0).ok());
}

TEST_F(ServerBspTest, MessageOverTheLimitIsResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--max-message-bytes=100000"}));
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  v1::PushResponse ack;
  // 50000 fp32 values: about 200 KB, twice the limit.
  grpc::Status s =
      Push(stub_.get(), 0, 0, {{0, DenseData(RandomValues(50000, 3))}}, &ack);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << ToAbsl(s);
  // The server lives on and takes messages under the limit.
  s = Push(stub_.get(), 0, 0, {{0, DenseData(RandomValues(1000, 3))}}, &ack);
  EXPECT_TRUE(s.ok()) << ToAbsl(s);
}

TEST_F(ServerBspTest, InfoAndHealthReportAServingShard) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--shard-id=1", "--num-shards=3"}));
  auto channel = server_->NewChannel();
  EXPECT_EQ(CheckHealth(channel, "").value_or(-1), 1);
  EXPECT_EQ(CheckHealth(channel, "gradwire.v1.ParameterServer").value_or(-1),
            1);
  EXPECT_EQ(CheckHealth(channel, "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);

  grpc::ClientContext context;
  SetTimeout(&context);
  v1::ShardInfo info;
  ASSERT_TRUE(stub_->GetInfo(&context, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.shard_id(), 1u);
  EXPECT_EQ(info.num_shards(), 3u);
  EXPECT_FALSE(info.initialized());
  EXPECT_FALSE(info.build_version().empty());
  // The startup line names a port that clients can connect to.
  EXPECT_EQ(server_->Stdout(),
            "gradwire-server listening on " + server_->target() + "\n");
}

TEST_F(ServerBspTest, InfoReportsTheInitialisedShard) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::ShardInfo info;
  ASSERT_TRUE(stub_->GetInfo(&context, v1::GetInfoRequest(), &info).ok());
  EXPECT_TRUE(info.initialized());
  EXPECT_EQ(info.num_chunks(), 2u);
  EXPECT_EQ(info.num_elements(), 1777u);
  EXPECT_EQ(info.config().mode(), v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(info.max_version(), 0u);
}

TEST_F(ServerBspTest, ForeignChunkIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  v1::PushResponse ack;
  const grpc::Status push =
      Push(stub_.get(), 0, 0, {{99, DenseData(RandomValues(1000, 4))}}, &ack);
  EXPECT_EQ(push.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << ToAbsl(push);
  const std::vector<TestChunk> foreign = {{99, std::vector<float>(1000)}};
  EXPECT_EQ(PullDense(stub_.get(), 0, foreign, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServerBspTest, MalformedGradientIsInvalidArgumentAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  // One sparse element at index 1000 of a 1000-element chunk. Written by
  // hand: the encoder refuses to produce it.
  v1::ChunkData out_of_range;
  out_of_range.set_numel(1000);
  v1::SparseValues* sparse = out_of_range.mutable_sparse();
  sparse->set_nnz(1);
  sparse->set_indices(std::string("\xe8\x07", 2));  // varint 1000
  sparse->set_value_type(v1::VALUE_TYPE_FP32);
  const float one = 1.0f;
  sparse->set_values(std::string(reinterpret_cast<const char*>(&one), 4));
  std::vector<float> with_nan = RandomValues(1000, 5);
  with_nan[123] = std::nanf("");

  v1::PushResponse ack;
  grpc::Status s = Push(stub_.get(), 0, 0, {{0, out_of_range}}, &ack);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << ToAbsl(s);
  s = Push(stub_.get(), 0, 0,
           {{0, DenseData(RandomValues(1000, 6))}, {1, DenseData(with_nan)}},
           &ack);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << ToAbsl(s);

  // Neither refused push counted: step 0 is still new for worker 0, on both
  // chunks, and the weights are the initial ones.
  s = Push(stub_.get(), 0, 0,
           {{0, DenseData(RandomValues(1000, 6))},
            {1, DenseData(RandomValues(777, 6))}},
           &ack);
  ASSERT_TRUE(s.ok()) << ToAbsl(s);
  EXPECT_FALSE(ack.acks(0).duplicate());
  EXPECT_FALSE(ack.acks(1).duplicate());
  auto weights = PullDense(stub_.get(), 0, chunks_, 0);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->at(0), chunks_[0].initial);
  EXPECT_EQ(weights->at(1), chunks_[1].initial);
}

}  // namespace
}  // namespace gradwire::testing
