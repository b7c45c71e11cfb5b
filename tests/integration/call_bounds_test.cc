// The bounds on what one client may hold of a live shard: Pulls of one
// worker id (--max-waiting-pulls-per-worker), calls of one connection
// (--max-calls-per-connection) and calls waiting in a pool's queue
// (--max-queued-calls). Past each, calls are answered RESOURCE_EXHAUSTED at
// once, with the retry metadata a client backs off on, and the other
// clients are still served promptly.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "common/retry_metadata.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

// A Pull that waits for a step that never comes, started asynchronously.
struct HeldPull {
  grpc::ClientContext context;
  v1::PullRequest request;
  v1::PullResponse response;
  grpc::Status status;
  absl::Time answered_at;
};

// Starts `count` Pulls by `worker` of step 1000 of `key` over `stub`, each
// with a deadline `hold` from now.
std::vector<std::unique_ptr<HeldPull>> HoldPulls(
    v1::ParameterServer::Stub* stub, uint32_t worker, uint64_t key, int count,
    absl::Duration hold, absl::BlockingCounter* answered) {
  std::vector<std::unique_ptr<HeldPull>> pulls;
  for (int i = 0; i < count; ++i) {
    auto call = std::make_unique<HeldPull>();
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + hold));
    call->request.set_worker_id(worker);
    v1::ChunkPull* pull = call->request.add_chunks();
    pull->set_key(key);
    pull->set_min_step(1000);
    HeldPull* raw = call.get();
    stub->async()->Pull(&raw->context, &raw->request, &raw->response,
                        [raw, answered](grpc::Status s) {
                          raw->status = std::move(s);
                          raw->answered_at = absl::Now();
                          answered->DecrementCount();
                        });
    pulls.push_back(std::move(call));
  }
  return pulls;
}

// A stub on a connection of its own (not shared with other stubs of the
// process), as another client's would be.
std::unique_ptr<v1::ParameterServer::Stub> OwnConnection(
    const ServerProcess& server) {
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
      server.target(), grpc::InsecureChannelCredentials(), own_connection));
}

// How many of `pulls` were refused as busy, with the retry metadata, within
// `soon` of `start`; every other one must have run to its deadline.
int CountBusy(const std::vector<std::unique_ptr<HeldPull>>& pulls,
              absl::Time start, absl::Duration soon) {
  int busy = 0;
  for (const auto& pull : pulls) {
    if (pull->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++busy;
      EXPECT_LT(pull->answered_at - start, soon);
      const auto& trailers = pull->context.GetServerTrailingMetadata();
      EXPECT_EQ(trailers.count(kRetryAfterMetadataKey), 1u);
    } else {
      EXPECT_EQ(pull->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
          << pull->status.error_message();
    }
  }
  return busy;
}

class CallBoundsTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    flags.push_back("--mode=bsp");
    flags.push_back("--num-workers=2");
    flags.push_back("--worker-timeout-seconds=0");
    auto server = ServerProcess::Start(flags);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
    ASSERT_TRUE(InitBspWorkers(stub_.get(), chunks_, 2).ok());
  }

  // Worker 1's pull of step 0, answered at once, on its own connection:
  // true when it is answered within a second.
  bool OtherWorkerIsServedPromptly() {
    auto other = OwnConnection(*server_);
    const absl::Time start = absl::Now();
    auto pulled = PullDense(other.get(), 1, chunks_, 0, absl::Seconds(5));
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return pulled.ok() && absl::Now() - start < absl::Seconds(1);
  }

  const std::vector<TestChunk> chunks_ = MakeChunks({64}, /*seed=*/3);
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

// One worker id cannot take every pull thread with Pulls of a step that
// never comes.
TEST_F(CallBoundsTest, PullsOfOneWorkerAreCapped) {
  Start({"--pull-threads=4", "--max-waiting-pulls-per-worker=2"});
  constexpr int kPulls = 12;
  absl::BlockingCounter answered(kPulls);
  const absl::Time start = absl::Now();
  auto pulls = HoldPulls(stub_.get(), 0, chunks_[0].key, kPulls,
                         absl::Seconds(3), &answered);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(OtherWorkerIsServedPromptly());
  answered.Wait();
  EXPECT_EQ(CountBusy(pulls, start, absl::Seconds(2)), kPulls - 2);
}

// A client without a worker token that claims every worker id cannot take
// the pull threads from the workers: its pulls are counted against its
// connection before they take a thread, so the honest workers' pulls (each
// on its own connection, as GrpcPsClient's) are answered at once and their
// BSP step completes.
TEST_F(CallBoundsTest, PullsClaimingOtherIdsCountAgainstTheirConnection) {
  Start({"--max-waiting-pulls-per-worker=8"});  // 64 pull threads.
  constexpr int kIds = 2, kPullsEach = 32;      // Every id of the job.
  absl::BlockingCounter answered(kIds * kPullsEach);
  auto hostile = OwnConnection(*server_);
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<HeldPull>> pulls;
  for (uint32_t id = 0; id < kIds; ++id) {
    for (auto& pull : HoldPulls(hostile.get(), id, chunks_[0].key, kPullsEach,
                                absl::Seconds(4), &answered)) {
      pulls.push_back(std::move(pull));
    }
  }
  absl::SleepFor(absl::Milliseconds(300));
  // Both workers push step 0 and pull its result, each on its own
  // connection, within a second.
  for (uint32_t worker = 0; worker < 2; ++worker) {
    auto own = OwnConnection(*server_);
    v1::PushRequest push;
    push.set_worker_id(worker);
    push.set_step(0);
    v1::ChunkGradient* gradient = push.add_chunks();
    gradient->set_key(chunks_[0].key);
    *gradient->mutable_gradient() =
        DenseData(std::vector<float>(chunks_[0].initial.size(), 0.5f));
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(5));
    v1::PushResponse pushed;
    const grpc::Status status = own->Push(&context, push, &pushed);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  for (uint32_t worker = 0; worker < 2; ++worker) {
    auto own = OwnConnection(*server_);
    const absl::Time asked = absl::Now();
    auto pulled = PullDense(own.get(), worker, chunks_, 1, absl::Seconds(5));
    EXPECT_TRUE(pulled.ok()) << "worker " << worker << ": " << pulled.status();
    EXPECT_LT(absl::Now() - asked, absl::Seconds(1)) << "worker " << worker;
  }
  answered.Wait();
  // The connection's first 8 waited; the other 56 were refused at once.
  EXPECT_EQ(CountBusy(pulls, start, absl::Seconds(2)), kIds * kPullsEach - 8);
}

// One connection holds at most its share of calls; another connection is
// served.
TEST_F(CallBoundsTest, CallsOfOneConnectionAreCapped) {
  Start({"--pull-threads=8", "--max-waiting-pulls-per-worker=100",
         "--max-calls-per-connection=3"});
  constexpr int kPulls = 10;
  absl::BlockingCounter answered(kPulls);
  // A connection of its own: the Inits' places on stub_'s are given back
  // only once gRPC is done with them, which can come after their answers.
  auto held = OwnConnection(*server_);
  const absl::Time start = absl::Now();
  auto pulls = HoldPulls(held.get(), 0, chunks_[0].key, kPulls,
                         absl::Seconds(3), &answered);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(OtherWorkerIsServedPromptly());
  answered.Wait();
  EXPECT_EQ(CountBusy(pulls, start, absl::Seconds(2)), kPulls - 3);
}

// A full queue refuses more calls instead of keeping them.
TEST_F(CallBoundsTest, QueuedCallsAreBounded) {
  Start({"--pull-threads=1", "--max-waiting-pulls-per-worker=100",
         "--max-queued-calls=2"});
  constexpr int kPulls = 8;
  absl::BlockingCounter answered(kPulls);
  const absl::Time start = absl::Now();
  auto pulls = HoldPulls(stub_.get(), 0, chunks_[0].key, kPulls,
                         absl::Seconds(2), &answered);
  answered.Wait();
  // One runs, two wait in the queue (and time out there or after); the
  // rest are refused at once. On a loaded machine the pull thread may not
  // have taken the first call off the queue before the queue filled: then
  // two were kept and one more refused.
  const int busy = CountBusy(pulls, start, absl::Seconds(1.5));
  EXPECT_GE(busy, kPulls - 3);
  EXPECT_LE(busy, kPulls - 2);
}

}  // namespace
}  // namespace gradwire::testing
