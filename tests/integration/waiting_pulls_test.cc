// Many Pulls waiting for a step against a live shard: they wait in the
// shard's pull pool and its queue, not on a thread each, and a Push still
// goes through while they wait.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

constexpr int kWaitingPulls = 200;
constexpr int kPullThreads = 16;

// The Threads: line of /proc/PID/status, or -1.
int ThreadsOf(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) != 0) continue;
    int threads = -1;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(8)),
                         &threads)) {
      return threads;
    }
  }
  return -1;
}

TEST(WaitingPullsTest, ManyWaitingPullsHoldNoThreadEachAndPushesGoThrough) {
  auto server =
      ServerProcess::Start({"--mode=bsp", "--num-workers=2",
                            absl::StrCat("--pull-threads=", kPullThreads),
                            // All of them from worker 0, past its default
                            // share (call_bounds_test.cc tests the cap).
                            "--max-waiting-pulls-per-worker=1000"});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<v1::ParameterServer::Stub> stub = (*server)->NewStub();
  const std::vector<TestChunk> chunks = MakeChunks({1000}, /*seed=*/5);
  ASSERT_TRUE(InitBspWorkers(stub.get(), chunks, 2).ok());
  const int before = ThreadsOf((*server)->pid());
  ASSERT_GT(before, 0);

  // Step 1 never completes: worker 1 does not push.
  struct Call {
    grpc::ClientContext context;
    v1::PullRequest request;
    v1::PullResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  absl::BlockingCounter finished(kWaitingPulls);
  for (int i = 0; i < kWaitingPulls; ++i) {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(6));
    call->request.set_worker_id(0);
    v1::ChunkPull* pull = call->request.add_chunks();
    pull->set_key(chunks[0].key);
    pull->set_min_step(1);
    Call* raw = call.get();
    stub->async()->Pull(&raw->context, &raw->request, &raw->response,
                        [raw, &finished](grpc::Status s) {
                          raw->status = std::move(s);
                          finished.DecrementCount();
                        });
    calls.push_back(std::move(call));
  }
  absl::SleepFor(absl::Seconds(1));
  const int waiting = ThreadsOf((*server)->pid());
  // gRPC may add a poller or two; a thread per waiting pull would add 200.
  EXPECT_LE(waiting - before, 8) << before << " -> " << waiting;

  // A push is not queued behind the waiting pulls. It goes over a
  // connection of its own, as a worker's would: the pulls above fill their
  // connection's --max-concurrent-streams (100), so the rest of them wait
  // on the client.
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::unique_ptr<v1::ParameterServer::Stub> pusher =
      v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
          (*server)->target(), grpc::InsecureChannelCredentials(),
          own_connection));
  v1::PushRequest push;
  push.set_worker_id(0);
  push.set_step(0);
  v1::ChunkGradient* chunk = push.add_chunks();
  chunk->set_key(chunks[0].key);
  *chunk->mutable_gradient() = DenseData(RandomValues(1000, 7));
  grpc::ClientContext push_context;
  SetTimeout(&push_context);
  v1::PushResponse pushed;
  const absl::Time start = absl::Now();
  const grpc::Status push_status = pusher->Push(&push_context, push, &pushed);
  EXPECT_TRUE(push_status.ok()) << push_status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  finished.Wait();
  for (const auto& call : calls) {
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << call->status.error_message();
  }
  const absl::StatusOr<int> health = CheckHealth((*server)->NewChannel(), "");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, 1);
}

}  // namespace
}  // namespace gradwire::testing
