// What one hostile or faulty request costs a live shard: for each case, a
// fresh gradwire-server, its peak RSS (VmHWM) and thread count before and
// after the request, the status the request got, and the bound every case
// must stay under (64 MiB of peak RSS, a handful of threads). Prints the
// table that docs/architecture.md's "What one hostile request costs" shows.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

constexpr int64_t kMaxPeakGrowthKib = 64 * 1024;
constexpr int kMaxThreadGrowth = 8;

// A field of /proc/PID/status ("VmHWM:", "Threads:"), or -1.
int64_t StatusField(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::string value(absl::StripAsciiWhitespace(line.substr(field.size())));
    if (absl::EndsWith(value, " kB")) value.resize(value.size() - 3);
    int64_t parsed = -1;
    if (absl::SimpleAtoi(value, &parsed)) return parsed;
  }
  return -1;
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(60));
  return context;
}

struct Case {
  std::string name;
  std::vector<std::string> server_flags;
  // Sends the request; returns its status.
  std::function<grpc::Status(ServerProcess*)> send;
  grpc::StatusCode expected;
};

v1::InitRequest OneElementChunks(uint32_t chunks, uint32_t num_workers) {
  v1::InitRequest init;
  init.set_worker_id(0);
  *init.mutable_config() = SgdConfig(num_workers, v1::CONSISTENCY_MODE_ASP);
  for (uint32_t key = 0; key < chunks; ++key) {
    v1::ChunkDeclaration* chunk = init.add_chunks();
    chunk->set_key(key);
    chunk->set_tensor_name("t");
    *chunk->mutable_initial() = DenseData({1.0f});
  }
  return init;
}

std::vector<Case> Cases() {
  const std::vector<TestChunk> model = MakeChunks({1000}, /*seed=*/4);
  auto init_first = [model](ServerProcess* server) {
    return InitBspWorkers(server->NewStub().get(), model, 1);
  };
  std::vector<Case> cases;
  cases.push_back({"Pull naming one key 100,000 times (0.4 MB)",
                   {"--num-workers=1"},
                   [=](ServerProcess* server) {
                     EXPECT_TRUE(init_first(server).ok());
                     v1::PullRequest pull;
                     for (int i = 0; i < 100000; ++i)
                       pull.add_chunks()->set_key(model[0].key);
                     grpc::ClientContext context;
                     v1::PullResponse response;
                     return server->NewStub()->Pull(WithDeadline(&context),
                                                    pull, &response);
                   },
                   grpc::StatusCode::INVALID_ARGUMENT});
  cases.push_back({"Push of 1,000,000 empty chunk entries (2 MB)",
                   {"--num-workers=1"},
                   [=](ServerProcess* server) {
                     EXPECT_TRUE(init_first(server).ok());
                     v1::PushRequest push;
                     for (int i = 0; i < 1000000; ++i) push.add_chunks();
                     grpc::ClientContext context;
                     v1::PushResponse response;
                     return server->NewStub()->Push(WithDeadline(&context),
                                                    push, &response);
                   },
                   grpc::StatusCode::INVALID_ARGUMENT});
  cases.push_back({"Init of 256 chunks x 65,536 workers (8 KB)",
                   {},
                   [](ServerProcess* server) {
                     grpc::ClientContext context;
                     v1::InitResponse response;
                     return server->NewStub()->Init(
                         WithDeadline(&context), OneElementChunks(256, 65536),
                         &response);
                   },
                   grpc::StatusCode::RESOURCE_EXHAUSTED});
  cases.push_back({"Init of 1,000,000 one-element chunks (18 MB)",
                   {},
                   [](ServerProcess* server) {
                     grpc::ClientContext context;
                     v1::InitResponse response;
                     return server->NewStub()->Init(
                         WithDeadline(&context), OneElementChunks(1000000, 1),
                         &response);
                   },
                   grpc::StatusCode::RESOURCE_EXHAUSTED});
  cases.push_back(
      {"Push whose bytes are not a message (11-byte varint)",
       {"--num-workers=1"},
       [=](ServerProcess* server) {
         EXPECT_TRUE(init_first(server).ok());
         grpc::GenericStub generic(server->NewChannel());
         grpc::ClientContext context;
         grpc::Slice slice("\x08" + std::string(10, '\xff') + "\x01");
         grpc::ByteBuffer request(&slice, 1);
         grpc::ByteBuffer response;
         absl::Notification done;
         grpc::Status status;
         generic.UnaryCall(
             WithDeadline(&context), "/gradwire.v1.ParameterServer/Push",
             grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
               status = std::move(s);
               done.Notify();
             });
         done.WaitForNotification();
         return status;
       },
       grpc::StatusCode::INVALID_ARGUMENT});
  cases.push_back(
      {"ASP push that would make a weight infinite (lr 1, w 3e38, g -3e38)",
       {"--num-workers=1"},
       [](ServerProcess* server) {
         v1::InitRequest init = OneElementChunks(1, 1);
         init.mutable_config()->mutable_optimizer()->set_learning_rate(1.0);
         *init.mutable_chunks(0)->mutable_initial() = DenseData({3e38f});
         auto stub = server->NewStub();
         grpc::ClientContext init_context;
         v1::InitResponse initialized;
         EXPECT_TRUE(
             stub->Init(WithDeadline(&init_context), init, &initialized).ok());
         v1::PushRequest push;
         push.set_worker_id(0);
         push.set_step(0);
         v1::ChunkGradient* chunk = push.add_chunks();
         chunk->set_key(0);
         *chunk->mutable_gradient() = DenseData({-3e38f});
         grpc::ClientContext context;
         v1::PushResponse response;
         return stub->Push(WithDeadline(&context), push, &response);
       },
       grpc::StatusCode::FAILED_PRECONDITION});
  cases.push_back(
      {"200 Pulls waiting for a step that never comes",
       {"--num-workers=2"},
       [=](ServerProcess* server) {
         auto stub = server->NewStub();
         EXPECT_TRUE(InitBspWorkers(stub.get(), model, 2).ok());
         struct Call {
           grpc::ClientContext context;
           v1::PullRequest request;
           v1::PullResponse response;
         };
         std::vector<std::unique_ptr<Call>> calls;
         absl::BlockingCounter done(200);
         // The callbacks run on gRPC's threads, several at once.
         absl::Mutex last_mu;
         grpc::Status last;
         for (int i = 0; i < 200; ++i) {
           auto call = std::make_unique<Call>();
           call->context.set_deadline(std::chrono::system_clock::now() +
                                      std::chrono::seconds(3));
           v1::ChunkPull* pull = call->request.add_chunks();
           pull->set_key(model[0].key);
           pull->set_min_step(1);
           Call* raw = call.get();
           stub->async()->Pull(&raw->context, &raw->request, &raw->response,
                               [&done, &last, &last_mu](grpc::Status s) {
                                 {
                                   absl::MutexLock lock(&last_mu);
                                   last = std::move(s);
                                 }
                                 done.DecrementCount();
                               });
           calls.push_back(std::move(call));
         }
         done.Wait();
         absl::MutexLock lock(&last_mu);
         return last;
       },
       grpc::StatusCode::DEADLINE_EXCEEDED});
  return cases;
}

TEST(RequestCostsTest, NoRequestRaisesPeakRssBy64MibOrAddsThreads) {
  std::string table =
      "| request | code | message | peak RSS | threads |\n"
      "|---|---|---|---:|---:|\n";
  for (const Case& c : Cases()) {
    auto server = ServerProcess::Start(c.server_flags);
    ASSERT_TRUE(server.ok()) << c.name << ": " << server.status();
    const pid_t pid = (*server)->pid();
    // Steady state: the shard answered a call.
    EXPECT_TRUE(CheckHealth((*server)->NewChannel(), "").ok());
    const int64_t peak_before = StatusField(pid, "VmHWM:");
    const int64_t threads_before = StatusField(pid, "Threads:");
    const grpc::Status status = c.send(server->get());
    const int64_t peak_after = StatusField(pid, "VmHWM:");
    // The largest thread count while the waiting pulls were in flight is
    // what matters; sampled right after they ended it is a lower bound, so
    // the waiting-pulls test samples during the wait as well.
    const int64_t threads_after = StatusField(pid, "Threads:");
    EXPECT_EQ(status.error_code(), c.expected)
        << c.name << ": " << status.error_message();
    EXPECT_LE(peak_after - peak_before, kMaxPeakGrowthKib) << c.name;
    EXPECT_LE(threads_after - threads_before, kMaxThreadGrowth) << c.name;
    std::string message = status.error_message();
    if (message.size() > 90) message = message.substr(0, 87) + "...";
    absl::StrAppendFormat(&table, "| %s | %d | %s | %+.1f MB | %+d |\n", c.name,
                          static_cast<int>(status.error_code()), message,
                          (peak_after - peak_before) / 1024.0,
                          static_cast<int>(threads_after - threads_before));
    // Still serving afterwards.
    const absl::StatusOr<int> health = CheckHealth((*server)->NewChannel(), "");
    ASSERT_TRUE(health.ok()) << c.name << ": " << health.status();
    EXPECT_EQ(*health, 1) << c.name;
  }
  std::printf("%s", table.c_str());
}

}  // namespace
}  // namespace gradwire::testing
