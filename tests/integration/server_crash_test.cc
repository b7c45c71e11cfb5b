// Crash safety of gradwire-server: a SIGKILLed shard restarts from its
// newest checkpoint and, with the workers' retries, ends exactly where an
// uninterrupted run ends; SIGTERM shuts down cleanly with a final checkpoint.
#include <signal.h>

#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/durability/checkpoint_files.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

class ServerCrashTest : public ::testing::Test {
 protected:
  std::unique_ptr<ServerProcess> StartServer(
      std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = {"--mode=bsp", "--num-workers=1",
                                     "--checkpoint-dir=" + checkpoints_.path()};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    auto server = ServerProcess::Start(args);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  v1::InitResponse Init(v1::ParameterServer::Stub* stub) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    const grpc::Status s = stub->Init(
        &context, MakeInit(SgdConfig(1, v1::CONSISTENCY_MODE_BSP), chunks_, 0),
        &response);
    EXPECT_TRUE(s.ok()) << ToAbsl(s);
    return response;
  }

  std::vector<float> Gradient(uint64_t step, const TestChunk& chunk) const {
    return RandomValues(chunk.initial.size(), 5000 + 10 * step + chunk.key);
  }

  // Pushes every chunk's gradient of `step`; returns the acks.
  v1::PushResponse PushStep(v1::ParameterServer::Stub* stub, uint64_t step) {
    v1::PushRequest request;
    request.set_worker_id(0);
    request.set_step(step);
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkGradient* pushed = request.add_chunks();
      pushed->set_key(chunk.key);
      *pushed->mutable_gradient() = DenseData(Gradient(step, chunk));
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub->Push(&context, request, &response);
    EXPECT_TRUE(s.ok()) << "step " << step << ": " << ToAbsl(s);
    return response;
  }

  // The weights after steps [0, steps), each applied once.
  DenseReference ReferenceAfter(uint64_t steps) const {
    DenseReference reference(chunks_, 1);
    for (uint64_t step = 0; step < steps; ++step) {
      for (const TestChunk& chunk : chunks_) {
        reference.AddPush(chunk.key, Gradient(step, chunk));
      }
      reference.FinishStep();
    }
    return reference;
  }

  void ExpectWeightsAfter(v1::ParameterServer::Stub* stub, uint64_t steps) {
    auto weights = PullDense(stub, 0, chunks_, steps);
    ASSERT_TRUE(weights.ok()) << weights.status();
    const DenseReference reference = ReferenceAfter(steps);
    for (const TestChunk& chunk : chunks_) {
      EXPECT_LE(MaxRelativeDifference(weights->at(chunk.key),
                                      reference.weights(chunk.key)),
                1e-5)
          << "chunk " << chunk.key << " after " << steps << " steps";
    }
  }

  // Checkpoint `sequence` (the sum of the chunk versions) exists.
  bool HasCheckpoint(uint64_t sequence) const {
    return std::filesystem::exists(checkpoints_.path() + "/" +
                                   CheckpointFileName(sequence));
  }

  bool WaitForCheckpoint(uint64_t sequence, absl::Duration timeout) const {
    const absl::Time deadline = absl::Now() + timeout;
    while (!HasCheckpoint(sequence)) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  TempDir checkpoints_;
  std::vector<TestChunk> chunks_ = MakeChunks({1000, 777}, /*seed=*/23);
};

TEST_F(ServerCrashTest, KilledShardResumesFromItsCheckpointExactlyOnce) {
  {
    auto server = StartServer({"--checkpoint-every=1"});
    ASSERT_NE(server, nullptr);
    auto stub = server->NewStub();
    EXPECT_TRUE(Init(stub.get()).initialized_now());
    for (uint64_t step = 0; step < 5; ++step) PushStep(stub.get(), step);
    // Two chunks at version 5.
    ASSERT_TRUE(WaitForCheckpoint(10, absl::Seconds(10))) << server->Stderr();
    server->Signal(SIGKILL);
    EXPECT_EQ(server->Wait(absl::Seconds(10)).value_or(-1), 128 + SIGKILL);
  }

  auto server = StartServer({"--checkpoint-every=1"});
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->Stderr().find("restored checkpoint sequence 10"),
            std::string::npos)
      << server->Stderr();
  auto stub = server->NewStub();
  const v1::InitResponse init = Init(stub.get());
  EXPECT_FALSE(init.initialized_now());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(init.versions(i), 5u);
    EXPECT_EQ(init.next_steps(i), 5u);
  }
  // The worker did not see the acks of its last steps and retries them.
  for (uint64_t step = 3; step < 5; ++step) {
    const v1::PushResponse acks = PushStep(stub.get(), step);
    for (const v1::ChunkAck& ack : acks.acks()) {
      EXPECT_TRUE(ack.duplicate()) << "step " << step;
      EXPECT_EQ(ack.version(), 5u);
    }
  }
  ExpectWeightsAfter(stub.get(), 5);
  for (uint64_t step = 5; step < 8; ++step) {
    const v1::PushResponse acks = PushStep(stub.get(), step);
    for (const v1::ChunkAck& ack : acks.acks()) {
      EXPECT_FALSE(ack.duplicate()) << "step " << step;
    }
  }
  ExpectWeightsAfter(stub.get(), 8);
}

TEST_F(ServerCrashTest, SigtermWritesAFinalCheckpointAndExitsZero) {
  {
    // Checkpoints only at shutdown. An idle client holds a graceful shutdown
    // until its channel next polls (up to 5 s), so keep the grace short.
    auto server = StartServer({"--shutdown-grace-seconds=2"});
    ASSERT_NE(server, nullptr);
    auto stub = server->NewStub();
    Init(stub.get());
    PushStep(stub.get(), 0);
    PushStep(stub.get(), 1);
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_FALSE(HasCheckpoint(4));
    server->Signal(SIGTERM);
    EXPECT_EQ(server->Wait(absl::Seconds(10)).value_or(-1), 0)
        << server->Stderr();
    EXPECT_TRUE(HasCheckpoint(4)) << server->Stderr();
    EXPECT_NE(server->Stderr().find("final checkpoint sequence 4"),
              std::string::npos)
        << server->Stderr();
  }
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = server->NewStub();
  const v1::InitResponse init = Init(stub.get());
  EXPECT_FALSE(init.initialized_now());
  EXPECT_EQ(init.versions(0), 2u);
  ExpectWeightsAfter(stub.get(), 2);
}

TEST_F(ServerCrashTest, SigintEndsPullsThatWaitForAStep) {
  auto server = StartServer({"--shutdown-grace-seconds=20"});
  ASSERT_NE(server, nullptr);
  auto stub = server->NewStub();
  Init(stub.get());
  auto waiting = std::async(std::launch::async, [&] {
    return PullDense(stub.get(), 0, chunks_, /*min_step=*/1, absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  server->Signal(SIGINT);
  EXPECT_EQ(server->Wait(absl::Seconds(10)).value_or(-1), 0)
      << server->Stderr();
  // Well inside the 20 s grace: the pull stopped waiting at once.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(waiting.get().status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gradwire::testing
