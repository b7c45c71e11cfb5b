// SyncOptions embeds the client's and the node group's options whole:
// what is set there reaches GrpcPsClient and LocalGroup through
// ParameterSync::Connect and Create.
#include "worker/sync_options.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/dead_address.h"
#include "worker/parameter_sync.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

using testing::DeadAddress;

// A client of one shard that is never called: Create only asks how many
// shards there are.
class OneShardClient final : public PsClient {
 public:
  uint32_t num_shards() const override { return 1; }
  absl::Status Init(const std::vector<v1::InitRequest>&,
                    std::vector<v1::InitResponse>*) override {
    return absl::UnimplementedError("Init");
  }
  absl::Status Push(const std::vector<v1::PushRequest>&,
                    std::vector<v1::PushResponse>*) override {
    return absl::UnimplementedError("Push");
  }
  absl::Status Pull(const std::vector<v1::PullRequest>&,
                    std::vector<v1::PullResponse>*) override {
    return absl::UnimplementedError("Pull");
  }
  TrafficStats traffic() const override { return {}; }
};

TEST(SyncOptionsTest, ClientDefaultsAreTheClientsWithALongerPull) {
  const SyncOptions options;
  const ClientOptions client;
  EXPECT_EQ(options.client.pull_timeout, absl::Seconds(300));
  EXPECT_EQ(options.client.rpc_timeout, client.rpc_timeout);
  EXPECT_EQ(options.client.connect_timeout, client.connect_timeout);
  EXPECT_EQ(options.client.max_attempts, client.max_attempts);
  EXPECT_EQ(options.client.max_message_bytes, client.max_message_bytes);
  EXPECT_EQ(options.local.size, 1);
}

TEST(SyncOptionsTest, ConnectValidatesTheClientOptions) {
  SyncOptions options;
  options.shard_addresses = {DeadAddress()};
  options.client.max_attempts = 0;
  absl::Status s = ParameterSync::Connect(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_attempts"));
  options.client.max_attempts = 1;
  options.client.max_message_bytes = 10;
  s = ParameterSync::Connect(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_message_bytes"));
}

TEST(SyncOptionsTest, ConnectWaitsTheClientsConnectTimeout) {
  SyncOptions options;
  options.shard_addresses = {DeadAddress()};
  options.client.connect_timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const absl::Status s = ParameterSync::Connect(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(SyncOptionsTest, CreateTakesTheWorkerIdAndTheGroupFromTheOptions) {
  SyncOptions options;
  options.num_workers = 2;
  options.client.worker_id = 5;
  absl::Status s =
      ParameterSync::Create(options, std::make_unique<OneShardClient>())
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("worker id 5"));
  options.client.worker_id = 1;
  options.local.size = 2;
  options.local.timeout = absl::ZeroDuration();
  s = ParameterSync::Create(options, std::make_unique<OneShardClient>())
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("timeout"));
  options.local = LocalGroupOptions();
  EXPECT_TRUE(
      ParameterSync::Create(options, std::make_unique<OneShardClient>()).ok());
}

}  // namespace
}  // namespace gradwire
