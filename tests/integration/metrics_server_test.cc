// gradwire-server's /metrics endpoint, scraped from a real process: pushes
// and pulls over gRPC move the counters they should, the text passes
// `promtool check metrics`, and the metrics flags behave.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::gradwire::metrics_test::HttpRequest;
using ::gradwire::metrics_test::ParseSamples;
using ::gradwire::metrics_test::PromtoolCheckMetrics;
using ::testing::HasSubstr;

constexpr uint32_t kWorkers = 2;

// Bytes that went each way, as the client serialized them.
struct Traffic {
  double push_received = 0, push_sent = 0, pull_received = 0, pull_sent = 0;
};

class MetricsServerTest : public ::testing::Test {
 protected:
  // Starts a server with `args` and metrics on 127.0.0.1, port from the OS.
  void StartServer(std::vector<std::string> args) {
    args.push_back("--metrics-address=127.0.0.1");
    args.push_back("--metrics-port-file=" + dir_.path() + "/metrics.port");
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
    // Written before the port file that Start waited for.
    const std::string text = ReadFileOrEmpty(dir_.path() + "/metrics.port");
    ASSERT_TRUE(
        absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &metrics_port_))
        << text;
    ASSERT_GT(metrics_port_, 0);
  }

  // The text at /metrics.
  std::string ScrapeText() {
    auto response = HttpRequest(metrics_port_, "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return "";
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->headers["content-type"],
              "text/plain; version=0.0.4; charset=utf-8");
    return response->body;
  }

  void InitAllWorkers() {
    const absl::Status s = InitBspWorkers(stub_.get(), chunks_, kWorkers);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Pushes `step` of `worker` for `keys` (dense random gradients) and
  // counts the bytes. Returns the call's status.
  absl::Status Push(uint32_t worker, uint64_t step,
                    const std::vector<uint64_t>& keys) {
    v1::PushRequest request;
    request.set_worker_id(worker);
    request.set_step(step);
    for (uint64_t key : keys) {
      v1::ChunkGradient* chunk = request.add_chunks();
      chunk->set_key(key);
      const size_t numel =
          key < chunks_.size() ? chunks_[key].initial.size() : size_t{10};
      *chunk->mutable_gradient() =
          DenseData(RandomValues(numel, 1000 + worker * 10 + step));
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub_->Push(&context, request, &response);
    traffic_.push_received += request.ByteSizeLong();
    if (s.ok()) traffic_.push_sent += response.ByteSizeLong();
    return ToAbsl(s);
  }

  // Pulls every chunk densely once step `min_step` is complete.
  absl::Status Pull(uint32_t worker, uint64_t min_step) {
    v1::PullRequest request;
    request.set_worker_id(worker);
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkPull* pull = request.add_chunks();
      pull->set_key(chunk.key);
      pull->set_min_step(min_step);
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PullResponse response;
    const grpc::Status s = stub_->Pull(&context, request, &response);
    traffic_.pull_received += request.ByteSizeLong();
    if (s.ok()) traffic_.pull_sent += response.ByteSizeLong();
    return ToAbsl(s);
  }

  TempDir dir_;
  std::vector<TestChunk> chunks_ = MakeChunks({1000, 777}, /*seed=*/7);
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  int metrics_port_ = 0;
  Traffic traffic_;
};

TEST_F(MetricsServerTest, CountsPushesAndBytesAndPassesPromtool) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--mode=bsp", "--num-workers=2"}));
  auto before = ParseSamples(ScrapeText());
  EXPECT_EQ(before["gradwire_shard_initialized{shard=\"0\"}"], 0);
  EXPECT_EQ(before["gradwire_shard_pushes_total{result=\"accepted\","
                   "shard=\"0\"}"],
            0);

  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  ASSERT_TRUE(Push(0, 0, {0, 1}).ok());
  ASSERT_TRUE(Push(1, 0, {0, 1}).ok());
  ASSERT_TRUE(Push(0, 0, {0, 1}).ok());  // a retry: duplicate
  EXPECT_TRUE(absl::IsFailedPrecondition(Push(0, 1, {999})));
  EXPECT_TRUE(absl::IsOutOfRange(Push(1, 5, {0})));
  EXPECT_TRUE(absl::IsOutOfRange(Push(7, 1, {0})));
  ASSERT_TRUE(Pull(0, 1).ok());
  ASSERT_TRUE(Pull(1, 1).ok());

  const std::string text = ScrapeText();
  auto after = ParseSamples(text);
  const auto pushes = [&](const std::string& result) {
    return after[absl::StrCat("gradwire_shard_pushes_total{result=\"", result,
                              "\",shard=\"0\"}")];
  };
  EXPECT_EQ(pushes("accepted"), 2);
  EXPECT_EQ(pushes("duplicate"), 1);
  EXPECT_EQ(pushes("not_owned"), 1);
  EXPECT_EQ(pushes("step_out_of_range"), 1);
  EXPECT_EQ(pushes("unknown_worker"), 1);
  EXPECT_EQ(pushes("invalid"), 0);
  EXPECT_EQ(after["gradwire_shard_received_bytes_total{rpc=\"push\","
                  "shard=\"0\"}"],
            traffic_.push_received);
  EXPECT_EQ(after["gradwire_shard_sent_bytes_total{rpc=\"push\","
                  "shard=\"0\"}"],
            traffic_.push_sent);
  EXPECT_EQ(after["gradwire_shard_received_bytes_total{rpc=\"pull\","
                  "shard=\"0\"}"],
            traffic_.pull_received);
  EXPECT_EQ(after["gradwire_shard_sent_bytes_total{rpc=\"pull\","
                  "shard=\"0\"}"],
            traffic_.pull_sent);
  // The dense weights of 1777 floats went out twice.
  EXPECT_GT(traffic_.pull_sent, 2 * 1777 * 4);
  EXPECT_EQ(after["gradwire_shard_pull_wait_seconds_count{shard=\"0\"}"], 2);
  // Two pulls of both chunks, dense.
  const auto pulled = [&](const std::string& answer) {
    return after[absl::StrCat("gradwire_shard_pulled_chunks_total{answer=\"",
                              answer, "\",shard=\"0\"}")];
  };
  EXPECT_EQ(pulled("dense"), 4);
  EXPECT_EQ(pulled("delta"), 0);
  EXPECT_EQ(pulled("chain"), 0);
  EXPECT_EQ(after["gradwire_shard_optimizer_seconds_count{shard=\"0\"}"], 2);
  EXPECT_EQ(after["gradwire_shard_aggregation_seconds_count{shard=\"0\"}"], 4);
  EXPECT_EQ(after["gradwire_shard_chunk_version_max{shard=\"0\"}"], 1);
  EXPECT_EQ(after["gradwire_shard_chunk_version_min{shard=\"0\"}"], 1);
  EXPECT_EQ(after["gradwire_shard_chunks{shard=\"0\"}"], 2);
  EXPECT_EQ(after["gradwire_shard_workers{shard=\"0\"}"], 2);
  EXPECT_EQ(after["gradwire_shard_active_workers{shard=\"0\"}"], 2);
  EXPECT_GT(after["process_start_time_seconds"], 1.5e9);
  EXPECT_GT(after["process_resident_memory_bytes"], 1 << 20);
  EXPECT_THAT(text, HasSubstr("gradwire_build_info{revision=\""));

  auto check = PromtoolCheckMetrics(text);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
  EXPECT_EQ(check->output, "") << text;
}

TEST_F(MetricsServerTest, CheckpointsAreTimed) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({"--mode=bsp", "--num-workers=2",
                   "--checkpoint-dir=" + dir_.path() + "/checkpoints",
                   "--checkpoint-every=1"}));
  ASSERT_NO_FATAL_FAILURE(InitAllWorkers());
  ASSERT_TRUE(Push(0, 0, {0, 1}).ok());
  ASSERT_TRUE(Push(1, 0, {0, 1}).ok());
  // The checkpointer polls every 50 ms; give it a few seconds.
  const std::string count =
      "gradwire_shard_checkpoint_seconds_count{shard=\"0\"}";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::map<std::string, double> samples;
  while (absl::Now() < deadline) {
    samples = ParseSamples(ScrapeText());
    if (samples[count] >= 1) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GE(samples[count], 1);
  EXPECT_GE(samples["gradwire_shard_checkpoint_age_seconds{shard=\"0\"}"], 0);
  EXPECT_EQ(samples["gradwire_shard_checkpoint_failures_total{shard=\"0\"}"],
            0);
}

TEST_F(MetricsServerTest, OtherPathsAreNotFound) {
  ASSERT_NO_FATAL_FAILURE(StartServer({}));
  auto response = HttpRequest(metrics_port_, "/");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
}

TEST(MetricsServerFlagsTest, DefaultsLetServersShareAMachine) {
  // Every server picks its own metrics port, like its gRPC port.
  TempDir dir;
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::set<std::string> ports;
  for (int i = 0; i < 3; ++i) {
    const std::string file = dir.path() + "/m" + std::to_string(i);
    auto server = ServerProcess::Start({"--metrics-port-file=" + file});
    ASSERT_TRUE(server.ok()) << server.status();
    servers.push_back(*std::move(server));
    ports.insert(
        std::string(absl::StripAsciiWhitespace(ReadFileOrEmpty(file))));
  }
  EXPECT_EQ(ports.size(), 3u);
}

TEST(MetricsServerFlagsTest, MinusOneTurnsTheEndpointOff) {
  auto server = ServerProcess::Start({"--metrics-port=-1"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Stderr(), HasSubstr("metrics endpoint off"));
}

TEST(MetricsServerFlagsTest, HelpListsTheMetricsFlags) {
  auto run = RunServerToExit({"--help"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0);
  for (const char* flag :
       {"--metrics-address (default: 0.0.0.0)", "--metrics-port (default: 0)",
        "--metrics-port-file"}) {
    EXPECT_THAT(run->out, HasSubstr(flag));
  }
}

TEST(MetricsServerFlagsTest, BadValuesExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--metrics-port=70000"}, "--metrics-port=70000"},
      {{"--metrics-port=-2"}, "--metrics-port=-2"},
      {{"--metrics-address=localhost"}, "--metrics-address=localhost"},
      {{"--metrics-address="}, "--metrics-address="},
      {{"--metrics-port=-1", "--metrics-port-file=/tmp/x"},
       "--metrics-port-file"}};
  for (const auto& [args, message] : cases) {
    auto run = RunServerToExit(args);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 2) << run->err;
    EXPECT_THAT(run->err, HasSubstr(message));
    EXPECT_EQ(run->out, "");
  }
}

TEST(MetricsServerFlagsTest, ATakenMetricsPortExitsOne) {
  TempDir dir;
  auto first =
      ServerProcess::Start({"--metrics-address=127.0.0.1",
                            "--metrics-port-file=" + dir.path() + "/m"});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string port(
      absl::StripAsciiWhitespace(ReadFileOrEmpty(dir.path() + "/m")));
  auto run =
      RunServerToExit({"--address=127.0.0.1", "--metrics-address=127.0.0.1",
                       "--metrics-port=" + port});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 1) << run->err;
  EXPECT_THAT(run->err, HasSubstr("cannot serve metrics on 127.0.0.1:" + port));
}

}  // namespace
}  // namespace gradwire::testing
