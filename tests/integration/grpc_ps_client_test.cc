// GrpcPsClient against real gradwire-server processes (two shards): BSP
// training from two workers matches a dense computation, the shards' errors
// keep their codes and name the shard's address, UNAVAILABLE is retried
// (across a SIGKILLed shard restarting on its port from its checkpoint) and
// nothing else is, traffic grows by the serialized sizes, and Connect and
// CheckHealth report unreachable addresses as UNAVAILABLE.
#include "client/grpc_ps_client.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/health_client.h"
#include "client/message_parts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/durability/checkpoint_files.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNumShards = 2;

// A gradwire-server on a port the test chooses, to bring a killed shard
// back where its clients expect it (ServerProcess always asks for port 0).
// SIGKILLed and reaped on destruction; dies with the test (PDEATHSIG).
class FixedPortServer {
 public:
  static absl::StatusOr<std::unique_ptr<FixedPortServer>> Start(
      std::vector<std::string> args, int port) {
    absl::StatusOr<std::string> binary = ServerBinary();
    if (!binary.ok()) return binary.status();
    std::unique_ptr<FixedPortServer> server(new FixedPortServer());
    args.insert(args.begin(), *binary);
    args.push_back(absl::StrCat("--port=", port));
    args.push_back("--port-file=" + server->dir_.path() + "/port");
    server->Spawn(args);
    if (server->pid_ < 0) return absl::InternalError("fork failed");
    if (!server->WaitForPort(absl::Seconds(10))) {
      return absl::UnavailableError("no port file; stderr:\n" +
                                    server->Stderr());
    }
    return server;
  }

  ~FixedPortServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  std::string Stderr() const { return ReadFileOrEmpty(dir_.path() + "/err"); }

 private:
  FixedPortServer() = default;

  void Spawn(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& arg : args)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const std::string err = dir_.path() + "/err";
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ != 0) return;
    // Only async-signal-safe calls until exec: the test has gRPC threads.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }

  bool WaitForPort(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    int port = 0;
    while (absl::Now() < deadline) {
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(
                               ReadFileOrEmpty(dir_.path() + "/port")),
                           &port) &&
          port > 0) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  TempDir dir_;
  pid_t pid_ = -1;
};

template <typename Message>
uint64_t Bytes(const std::vector<Message>& messages) {
  uint64_t total = 0;
  for (const Message& message : messages) total += message.ByteSizeLong();
  return total;
}

class GrpcPsClientTest : public ::testing::Test {
 protected:
  // Shard `shard` of kNumShards, BSP with `num_workers` workers.
  std::unique_ptr<ServerProcess> StartShard(
      uint32_t shard, uint32_t num_workers,
      std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = ShardArgs(shard, num_workers);
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    auto server = ServerProcess::Start(args);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::vector<std::string> ShardArgs(uint32_t shard,
                                            uint32_t num_workers) {
    return {absl::StrCat("--shard-id=", shard),
            absl::StrCat("--num-shards=", kNumShards), "--mode=bsp",
            absl::StrCat("--num-workers=", num_workers)};
  }

  // Short deadlines and quick, plentiful retries: a test fails in seconds,
  // and a restarting shard is found again within 200 ms.
  static ClientOptions Options(uint32_t worker) {
    ClientOptions options;
    options.worker_id = worker;
    options.rpc_timeout = absl::Seconds(10);
    options.pull_timeout = absl::Seconds(10);
    options.connect_timeout = absl::Seconds(10);
    options.initial_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    options.max_attempts = 60;
    return options;
  }

  std::unique_ptr<GrpcPsClient> Connect(
      const std::vector<std::unique_ptr<ServerProcess>>& servers,
      ClientOptions options) {
    std::vector<std::string> addresses;
    for (const auto& server : servers) addresses.push_back(server->target());
    auto client = GrpcPsClient::Connect(addresses, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Keys 0 and 2 live on shard 0, key 1 on shard 1.
  static uint32_t ShardOf(uint64_t key) { return key == 1 ? 1 : 0; }

  std::vector<v1::InitRequest> InitRequests(uint32_t worker,
                                            uint32_t num_workers) const {
    v1::TrainingConfig config =
        SgdConfig(num_workers, v1::CONSISTENCY_MODE_BSP);
    config.set_num_shards(kNumShards);
    std::vector<TestChunk> owned[kNumShards];
    for (const TestChunk& chunk : chunks_)
      owned[ShardOf(chunk.key)].push_back(chunk);
    std::vector<v1::InitRequest> requests;
    for (uint32_t shard = 0; shard < kNumShards; ++shard) {
      requests.push_back(MakeInit(config, owned[shard], worker));
      requests.back().set_shard_id(shard);
    }
    return requests;
  }

  static std::vector<float> Gradient(uint32_t worker, uint64_t step,
                                     const TestChunk& chunk) {
    return RandomValues(chunk.initial.size(),
                        9000 + 100 * step + 10 * worker + chunk.key);
  }

  std::vector<v1::PushRequest> PushRequests(uint32_t worker,
                                            uint64_t step) const {
    std::vector<v1::PushRequest> requests(kNumShards);
    for (v1::PushRequest& request : requests) {
      request.set_worker_id(worker);
      request.set_step(step);
    }
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkGradient* pushed = requests[ShardOf(chunk.key)].add_chunks();
      pushed->set_key(chunk.key);
      *pushed->mutable_gradient() = DenseData(Gradient(worker, step, chunk));
    }
    return requests;
  }

  std::vector<v1::PullRequest> PullRequests(uint32_t worker,
                                            uint64_t min_step) const {
    std::vector<v1::PullRequest> requests(kNumShards);
    for (v1::PullRequest& request : requests) request.set_worker_id(worker);
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkPull* pull = requests[ShardOf(chunk.key)].add_chunks();
      pull->set_key(chunk.key);
      pull->set_min_step(min_step);
    }
    return requests;
  }

  // The dense weights in `responses`, by key.
  std::map<uint64_t, std::vector<float>> Weights(
      const std::vector<v1::PullResponse>& responses) const {
    std::map<uint64_t, std::vector<float>> weights;
    for (const v1::PullResponse& response : responses) {
      for (const v1::ChunkWeights& answer : response.chunks()) {
        EXPECT_FALSE(answer.is_delta());
        auto dense = DecodeToDense(answer.data(),
                                   chunks_.at(answer.key()).initial.size());
        EXPECT_TRUE(dense.ok()) << dense.status();
        if (dense.ok()) weights[answer.key()] = *std::move(dense);
      }
    }
    return weights;
  }

  void ExpectWeightsAfter(const std::map<uint64_t, std::vector<float>>& weights,
                          uint32_t num_workers, uint64_t steps) const {
    DenseReference reference(chunks_, num_workers);
    for (uint64_t step = 0; step < steps; ++step) {
      for (uint32_t worker = 0; worker < num_workers; ++worker) {
        for (const TestChunk& chunk : chunks_) {
          reference.AddPush(chunk.key, Gradient(worker, step, chunk));
        }
      }
      reference.FinishStep();
    }
    ASSERT_EQ(weights.size(), chunks_.size());
    for (const TestChunk& chunk : chunks_) {
      EXPECT_LE(MaxRelativeDifference(weights.at(chunk.key),
                                      reference.weights(chunk.key)),
                1e-5)
          << "chunk " << chunk.key << " after " << steps << " steps";
    }
  }

  // Init, then `steps` BSP steps of push and pull. Returns the last weights.
  std::map<uint64_t, std::vector<float>> Train(GrpcPsClient* client,
                                               uint32_t worker,
                                               uint32_t num_workers,
                                               uint64_t steps) {
    std::vector<v1::InitResponse> init;
    absl::Status s = client->Init(InitRequests(worker, num_workers), &init);
    EXPECT_TRUE(s.ok()) << s;
    std::map<uint64_t, std::vector<float>> weights;
    for (uint64_t step = 0; step < steps && s.ok(); ++step) {
      std::vector<v1::PushResponse> acks;
      s = client->Push(PushRequests(worker, step), &acks);
      EXPECT_TRUE(s.ok()) << "step " << step << ": " << s;
      std::vector<v1::PullResponse> pulled;
      if (s.ok()) s = client->Pull(PullRequests(worker, step + 1), &pulled);
      EXPECT_TRUE(s.ok()) << "step " << step << ": " << s;
      weights = Weights(pulled);
    }
    return weights;
  }

  std::vector<TestChunk> chunks_ = MakeChunks({1000, 500, 777}, /*seed=*/41);
};

TEST_F(GrpcPsClientTest, TwoWorkersTrainBspAcrossTwoShards) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(StartShard(shard, /*num_workers=*/2));
    ASSERT_NE(servers.back(), nullptr);
  }
  constexpr uint64_t kSteps = 3;
  std::map<uint64_t, std::vector<float>> weights[2];
  std::vector<std::thread> workers;
  for (uint32_t worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&, worker] {
      std::unique_ptr<GrpcPsClient> client = Connect(servers, Options(worker));
      if (client == nullptr) return;
      EXPECT_EQ(client->num_shards(), kNumShards);
      weights[worker] = Train(client.get(), worker, 2, kSteps);
    });
  }
  for (std::thread& worker : workers) worker.join();
  ExpectWeightsAfter(weights[0], 2, kSteps);
  // Both replicas hold the shards' weights bit for bit.
  EXPECT_EQ(weights[0], weights[1]);
}

TEST_F(GrpcPsClientTest, ShardsOfMoreThanOneMessageTrainInParts) {
  // Shard 0 holds 1777 floats (7108 bytes) in two chunks: its Init, its
  // dense pushes and its dense pull answers each need two messages of at
  // most 6000 bytes, which the client learns from the shard's Init answer.
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(
        StartShard(shard, /*num_workers=*/2, {"--max-message-bytes=6000"}));
    ASSERT_NE(servers.back(), nullptr);
  }
  constexpr uint64_t kSteps = 3;
  std::map<uint64_t, std::vector<float>> weights[2];
  std::vector<std::thread> workers;
  for (uint32_t worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&, worker] {
      std::unique_ptr<GrpcPsClient> client = Connect(servers, Options(worker));
      if (client == nullptr) return;
      // The Init without values first, as a worker's Register sends it:
      // its answer carries the shard's limit.
      std::vector<v1::InitRequest> valueless = InitRequests(worker, 2);
      for (v1::InitRequest& request : valueless) {
        request = WithoutValues(request);
      }
      std::vector<v1::InitResponse> answers;
      ASSERT_TRUE(client->Init(valueless, &answers).ok());
      EXPECT_EQ(answers[0].max_message_bytes(), 6000u);
      // Both send values: one worker's parts install, the other is told
      // to wait (values_pending) while they arrive, then acknowledged.
      for (bool pending = true; pending;) {
        ASSERT_TRUE(client->Init(InitRequests(worker, 2), &answers).ok());
        pending = false;
        for (const v1::InitResponse& answer : answers) {
          pending = pending || answer.values_pending();
        }
        if (pending) absl::SleepFor(absl::Milliseconds(20));
      }
      weights[worker] = Train(client.get(), worker, 2, kSteps);
      // More than one message each way on shard 0.
      const TrafficStats traffic = client->traffic();
      EXPECT_GT(traffic.pull_bytes_received, kSteps * 1777 * sizeof(float));
    });
  }
  for (std::thread& worker : workers) worker.join();
  ExpectWeightsAfter(weights[0], 2, kSteps);
  EXPECT_EQ(weights[0], weights[1]);
  // Without the client's splitting the shard refuses the Init outright.
  grpc::ClientContext context;
  v1::InitResponse answer;
  const grpc::Status refused =
      servers[0]->NewStub()->Init(&context, InitRequests(0, 2)[0], &answer);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
}

TEST_F(GrpcPsClientTest, TrafficGrowsByTheSerializedSizes) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(StartShard(shard, /*num_workers=*/1));
    ASSERT_NE(servers.back(), nullptr);
  }
  std::unique_ptr<GrpcPsClient> client = Connect(servers, Options(0));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->traffic().init_bytes_sent, 0u);

  const std::vector<v1::InitRequest> init = InitRequests(0, 1);
  std::vector<v1::InitResponse> init_responses;
  ASSERT_TRUE(client->Init(init, &init_responses).ok());
  const std::vector<v1::PushRequest> push = PushRequests(0, 0);
  std::vector<v1::PushResponse> push_responses;
  ASSERT_TRUE(client->Push(push, &push_responses).ok());
  const std::vector<v1::PullRequest> pull = PullRequests(0, 1);
  std::vector<v1::PullResponse> pull_responses;
  ASSERT_TRUE(client->Pull(pull, &pull_responses).ok());
  ExpectWeightsAfter(Weights(pull_responses), 1, 1);

  const TrafficStats traffic = client->traffic();
  EXPECT_EQ(traffic.init_bytes_sent, Bytes(init));
  EXPECT_EQ(traffic.init_bytes_received, Bytes(init_responses));
  EXPECT_EQ(traffic.push_bytes_sent, Bytes(push));
  EXPECT_EQ(traffic.push_bytes_received, Bytes(push_responses));
  // Each pull goes out with allow_partial set (2 bytes), so that a shard
  // may answer in rounds.
  EXPECT_EQ(traffic.pull_bytes_sent, Bytes(pull) + 2 * pull.size());
  EXPECT_EQ(traffic.pull_bytes_received, Bytes(pull_responses));
  // 2277 fp32 weights came back.
  EXPECT_GT(traffic.pull_bytes_received, 2277 * sizeof(float));
  EXPECT_EQ(traffic.retries, 0u);
}

TEST_F(GrpcPsClientTest, ErrorsKeepTheirCodeAndNameTheShardAddress) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(StartShard(shard, /*num_workers=*/1));
    ASSERT_NE(servers.back(), nullptr);
  }
  ClientOptions options = Options(0);
  options.pull_timeout = absl::Milliseconds(300);
  std::unique_ptr<GrpcPsClient> client = Connect(servers, options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->address(1), servers[1]->target());

  // Init addressed to the wrong shards.
  std::vector<v1::InitRequest> swapped = InitRequests(0, 1);
  std::swap(swapped[0], swapped[1]);
  std::vector<v1::InitResponse> init;
  absl::Status s = client->Init(swapped, &init);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("shard 0 (" + servers[0]->target() + "): Init: "));

  ASSERT_TRUE(client->Init(InitRequests(0, 1), &init).ok());
  // Chunk 0 lives on shard 0; shard 1 refuses it.
  std::vector<v1::PushRequest> foreign = PushRequests(0, 0);
  // (In place of its own chunk: a push naming more chunks than the shard
  // owns is refused for that first, as INVALID_ARGUMENT.)
  *foreign[1].mutable_chunks(0) = foreign[0].chunks(0);
  std::vector<v1::PushResponse> acks;
  s = client->Push(foreign, &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("shard 1 (" + servers[1]->target() + "): Push: "));
  EXPECT_THAT(s.message(), HasSubstr("chunk 0"));

  // A pull for a step nobody pushes runs out of time, and is not retried.
  std::vector<v1::PullResponse> pulled;
  s = client->Pull(PullRequests(0, /*min_step=*/5), &pulled);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("): Pull: "));
  EXPECT_EQ(client->traffic().retries, 0u);

  // Caught before anything is sent.
  const uint64_t sent = client->traffic().push_bytes_sent;
  s = client->Push(PushRequests(/*worker=*/1, 1), &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker id 1"));
  s = client->Push(std::vector<v1::PushRequest>(3), &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(client->traffic().push_bytes_sent, sent);
}

TEST_F(GrpcPsClientTest, PushRetriesUntilAKilledShardIsBackOnItsPort) {
  TempDir checkpoints;
  const std::vector<std::string> checkpointing = {
      "--checkpoint-dir=" + checkpoints.path(), "--checkpoint-every=1"};
  std::vector<std::unique_ptr<ServerProcess>> servers;
  servers.push_back(StartShard(0, 1));
  servers.push_back(StartShard(1, 1, checkpointing));
  ASSERT_NE(servers[0], nullptr);
  ASSERT_NE(servers[1], nullptr);
  std::unique_ptr<GrpcPsClient> client = Connect(servers, Options(0));
  ASSERT_NE(client, nullptr);
  Train(client.get(), 0, 1, /*steps=*/3);
  // Shard 1 holds one chunk: checkpoint 3 is its state after step 2.
  const std::string checkpoint =
      checkpoints.path() + "/" + CheckpointFileName(3);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!std::filesystem::exists(checkpoint) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(checkpoint)) << servers[1]->Stderr();
  const int port = servers[1]->port();
  servers[1]->Signal(SIGKILL);
  ASSERT_EQ(servers[1]->Wait(absl::Seconds(10)).value_or(-1), 128 + SIGKILL);

  const std::vector<v1::PushRequest> push = PushRequests(0, 3);
  std::vector<v1::PushResponse> acks;
  auto pushed =
      std::async(std::launch::async, [&] { return client->Push(push, &acks); });
  absl::SleepFor(absl::Seconds(1));
  std::vector<std::string> args = ShardArgs(1, 1);
  args.insert(args.end(), checkpointing.begin(), checkpointing.end());
  auto restarted = FixedPortServer::Start(args, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();

  const absl::Status s = pushed.get();
  ASSERT_TRUE(s.ok()) << s << "\nrestarted shard:\n" << (*restarted)->Stderr();
  EXPECT_THAT((*restarted)->Stderr(),
              HasSubstr("restored checkpoint sequence 3"));
  ASSERT_EQ(acks[1].acks_size(), 1);
  EXPECT_EQ(acks[1].acks(0).version(), 4u);
  EXPECT_FALSE(acks[1].acks(0).duplicate());

  const TrafficStats traffic = client->traffic();
  // About 1 s of retries at 20-200 ms each.
  EXPECT_GE(traffic.retries, 3u);
  // Every attempt sent shard 1's request again; shard 0 was asked once.
  uint64_t pushed_before = 0;
  for (uint64_t step = 0; step < 3; ++step) {
    pushed_before += Bytes(PushRequests(0, step));
  }
  EXPECT_EQ(
      traffic.push_bytes_sent,
      pushed_before + Bytes(push) + traffic.retries * push[1].ByteSizeLong());

  std::vector<v1::PullResponse> pulled;
  ASSERT_TRUE(client->Pull(PullRequests(0, 4), &pulled).ok());
  ExpectWeightsAfter(Weights(pulled), 1, 4);
}

TEST_F(GrpcPsClientTest, RetriesRunOutWithUnavailable) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(StartShard(shard, /*num_workers=*/1));
    ASSERT_NE(servers.back(), nullptr);
  }
  ClientOptions options = Options(0);
  options.max_attempts = 4;
  std::unique_ptr<GrpcPsClient> client = Connect(servers, options);
  ASSERT_NE(client, nullptr);
  std::vector<v1::InitResponse> init;
  ASSERT_TRUE(client->Init(InitRequests(0, 1), &init).ok());
  servers[1]->Signal(SIGKILL);
  ASSERT_TRUE(servers[1]->Wait(absl::Seconds(10)).ok());

  const std::vector<v1::PushRequest> push = PushRequests(0, 0);
  std::vector<v1::PushResponse> acks;
  const absl::Status s = client->Push(push, &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("shard 1 (" + servers[1]->target() + "): Push: "));
  EXPECT_THAT(s.message(), HasSubstr("after 4 attempts"));
  // Shard 0 took its part.
  EXPECT_EQ(acks[0].acks_size(), 2);
  const TrafficStats traffic = client->traffic();
  EXPECT_EQ(traffic.retries, 3u);
  EXPECT_EQ(traffic.push_bytes_sent,
            push[0].ByteSizeLong() + 4 * push[1].ByteSizeLong());
}

// A BSP pull that waits for a worker that never pushes ends at once when
// the client is cancelled, and later calls fail before anything is sent.
TEST_F(GrpcPsClientTest, CancelCallsEndsAWaitingPullAndRefusesLaterCalls) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (uint32_t shard = 0; shard < kNumShards; ++shard) {
    servers.push_back(StartShard(shard, /*num_workers=*/2));
    ASSERT_NE(servers.back(), nullptr);
  }
  std::unique_ptr<GrpcPsClient> client = Connect(servers, Options(0));
  ASSERT_NE(client, nullptr);
  std::vector<v1::InitResponse> init;
  ASSERT_TRUE(client->Init(InitRequests(0, 2), &init).ok());
  std::vector<v1::PushResponse> acks;
  ASSERT_TRUE(client->Push(PushRequests(0, 0), &acks).ok());
  absl::Status pulled;
  absl::Time ended;
  std::thread puller([&] {
    std::vector<v1::PullResponse> responses;
    // Step 1 needs worker 1's push, which never comes: 10 s deadline.
    pulled = client->Pull(PullRequests(0, 1), &responses);
    ended = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time cancelled = absl::Now();
  client->CancelCalls();
  puller.join();
  EXPECT_EQ(pulled.code(), absl::StatusCode::kCancelled) << pulled;
  EXPECT_LT(ended - cancelled, absl::Seconds(2));
  const uint64_t sent = client->traffic().push_bytes_sent;
  const absl::Status pushed = client->Push(PushRequests(0, 1), &acks);
  EXPECT_EQ(pushed.code(), absl::StatusCode::kCancelled) << pushed;
  EXPECT_THAT(pushed.message(), HasSubstr("cancelled"));
  EXPECT_EQ(client->traffic().push_bytes_sent, sent);
}

TEST_F(GrpcPsClientTest, ConnectToADeadAddressIsUnavailableWithinTheTimeout) {
  auto live = StartShard(0, 1);
  ASSERT_NE(live, nullptr);
  const std::string dead = absl::StrCat("127.0.0.1:", PickFreeLoopbackPort());
  ClientOptions options = Options(0);
  options.connect_timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  auto client = GrpcPsClient::Connect({live->target(), dead}, options);
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
      << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("shard 1 (" + dead + ")"));
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST_F(GrpcPsClientTest, HealthCheckSeesServingAndDeadShards) {
  auto server = StartShard(0, 1);
  ASSERT_NE(server, nullptr);
  const absl::Status serving =
      gradwire::CheckHealth(server->target(), absl::Seconds(5));
  EXPECT_TRUE(serving.ok()) << serving;

  server->Signal(SIGKILL);
  ASSERT_TRUE(server->Wait(absl::Seconds(10)).ok());
  const absl::Status dead =
      gradwire::CheckHealth(server->target(), absl::Seconds(5));
  EXPECT_EQ(dead.code(), absl::StatusCode::kUnavailable) << dead;
  EXPECT_THAT(dead.message(), HasSubstr(server->target()));
}

}  // namespace
}  // namespace gradwire::testing
