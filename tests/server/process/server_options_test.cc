// The settings of a gradwire-server process without starting one: what
// ValidateServerOptions refuses (naming the flag) and what the shard gets.
// tests/integration/server_flags_test.cc runs the same checks through the
// binary's command line.
#include "server/process/server_options.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

// The message of the refusal of `options`; a pass is a test failure.
std::string Refusal(const ServerOptions& options) {
  const absl::Status status = ValidateServerOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(ServerOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateServerOptions(ServerOptions()).ok());
}

TEST(ServerOptionsTest, RefusalsNameTheFlag) {
  ServerOptions options;
  options.shard_id = 2;
  options.num_shards = 2;
  EXPECT_THAT(Refusal(options), HasSubstr("--shard-id=2"));

  options = ServerOptions();
  options.mode = "lockstep";
  EXPECT_THAT(Refusal(options), HasSubstr("--mode=lockstep"));

  options = ServerOptions();
  options.mode = "bsp";
  options.staleness = 3;
  EXPECT_THAT(Refusal(options), HasSubstr("--staleness=3"));

  options = ServerOptions();
  options.checkpoint_every = 10;
  EXPECT_THAT(Refusal(options), HasSubstr("--checkpoint-dir"));

  options = ServerOptions();
  options.wal_fsync = true;
  EXPECT_THAT(Refusal(options), HasSubstr("--wal-fsync"));

  options = ServerOptions();
  options.threads = -1;
  EXPECT_THAT(Refusal(options), HasSubstr("--threads=-1"));

  options = ServerOptions();
  options.pull_threads = -1;
  EXPECT_THAT(Refusal(options), HasSubstr("--pull-threads=-1"));

  options = ServerOptions();
  options.max_concurrent_streams = 0;
  EXPECT_THAT(Refusal(options), HasSubstr("--max-concurrent-streams=0"));

  options = ServerOptions();
  options.async_pull_deltas = "replicas";
  EXPECT_THAT(Refusal(options), HasSubstr("--async-pull-deltas=replicas"));

  options = ServerOptions();
  options.async_publish_every = -1;
  EXPECT_THAT(Refusal(options), HasSubstr("--async-publish-every=-1"));

  options = ServerOptions();
  options.memory_quota_bytes = options.max_message_bytes;
  EXPECT_THAT(Refusal(options), HasSubstr("--memory-quota-bytes="));

  // The memory budget must hold a decoded push and a pull answer of the
  // largest message size.
  options = ServerOptions();
  options.max_message_bytes = 1 << 20;
  options.memory_budget_bytes = (2 << 20) - 1;
  EXPECT_THAT(Refusal(options),
              HasSubstr("--memory-budget-bytes=2097151: must be >= 2 * "
                        "--max-message-bytes (2097152)"));
  options.memory_budget_bytes = 2 << 20;
  EXPECT_TRUE(ValidateServerOptions(options).ok());
  options.memory_budget_bytes = -1;
  EXPECT_THAT(Refusal(options), HasSubstr("--memory-budget-bytes=-1"));

  // Zero would refuse every Init; a negative value must not wrap around.
  for (const int64_t bad : {int64_t{0}, int64_t{-1}}) {
    options = ServerOptions();
    options.max_chunks = bad;
    EXPECT_THAT(Refusal(options),
                HasSubstr("--max-chunks=" + std::to_string(bad)));

    options = ServerOptions();
    options.max_init_overhead_bytes = bad;
    EXPECT_THAT(Refusal(options),
                HasSubstr("--max-init-overhead-bytes=" + std::to_string(bad)));
  }
}

TEST(ServerOptionsTest, ModesParseCaseInsensitivelyAndEmptyAcceptsInit) {
  EXPECT_EQ(ParseConsistencyMode("").value(), v1::CONSISTENCY_MODE_UNSPECIFIED);
  EXPECT_EQ(ParseConsistencyMode("BSP").value(), v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(ParseConsistencyMode("asp").value(), v1::CONSISTENCY_MODE_ASP);
  EXPECT_EQ(ParseConsistencyMode("Ssp").value(), v1::CONSISTENCY_MODE_SSP);
  EXPECT_FALSE(ParseConsistencyMode("bulk").ok());
}

TEST(ServerOptionsTest, ShardOptionsCarryTheJobsShape) {
  ServerOptions options;
  options.shard_id = 1;
  options.num_shards = 3;
  options.num_workers = 4;
  options.mode = "ssp";
  options.staleness = 2;
  options.shutdown_grace_seconds = 2.5;
  options.max_message_bytes = 12345;
  options.max_chunks = 321;
  options.max_init_overhead_bytes = 4567;
  options.async_pull_deltas = "Per-Worker";
  options.async_publish_every = 16;
  options.memory_budget_bytes = 98765;
  ASSERT_TRUE(ValidateServerOptions(options).ok());
  const ShardOptions shard = ToShardOptions(options);
  EXPECT_EQ(shard.shard_id, 1u);
  EXPECT_EQ(shard.num_shards, 3u);
  EXPECT_EQ(shard.num_workers, 4u);
  EXPECT_EQ(shard.mode, v1::CONSISTENCY_MODE_SSP);
  EXPECT_EQ(shard.staleness, 2u);
  EXPECT_EQ(shard.max_message_bytes, 12345u);
  EXPECT_EQ(shard.max_chunks, 321u);
  EXPECT_EQ(shard.max_init_overhead_bytes, 4567u);
  EXPECT_EQ(shard.async_pull_deltas, AsyncPullDeltas::kPerWorker);
  EXPECT_EQ(shard.async_publish_every, 16u);
  EXPECT_EQ(shard.memory_budget_bytes, 98765u);
  EXPECT_EQ(ToShardOptions(ServerOptions()).memory_budget_bytes,
            uint64_t{4} << 30);
  EXPECT_EQ(ShutdownGrace(options), absl::Milliseconds(2500));
}

}  // namespace
}  // namespace gradwire

namespace gradwire {
namespace {

// --pull-threads=0 (the default) gives every worker's allowed pulls a
// thread: an honest job never queues its own pulls behind one another.
TEST(ServerOptionsTest, DefaultPullThreadsFollowTheWorkers) {
  ServerOptions options;
  EXPECT_EQ(options.pull_threads, 0);
  EXPECT_EQ(PullThreads(options), kMinPullThreads);  // workers from Init
  options.num_workers = 4;
  EXPECT_EQ(PullThreads(options), kMinPullThreads);  // 4 x 8 < 64
  options.num_workers = 16;
  EXPECT_EQ(PullThreads(options), 16 * 8);
  options.max_waiting_pulls_per_worker = 100000;
  EXPECT_EQ(PullThreads(options), 100000);
  options.pull_threads = 5;
  EXPECT_EQ(PullThreads(options), 5);
}

}  // namespace
}  // namespace gradwire
