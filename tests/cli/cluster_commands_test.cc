// The command lines `gradwire local` starts its shards and workers with:
// the flags LocalClusterOptions documents, in that order, and the run
// directory's files.
#include "cli/cluster_commands.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

LocalClusterOptions Options() {
  LocalClusterOptions options;
  options.shards = 2;
  options.workers = 3;
  options.bin_dir = "/opt/gradwire/bin";
  options.worker_args = {"--model=mlp"};
  return options;
}

TEST(ShardCommandTest, ListensOnLoopbackAndWritesItsPortsToTheRunDirectory) {
  LocalClusterOptions options = Options();
  options.checkpoint_dir = "/ckpt";
  options.server_args = {"--async-pull-deltas=per-worker", "--wal=true"};
  const RunDirectory run("/run");
  const SpawnOptions spawn = ShardCommand(options, run, 1);
  // The user's --server-args come last.
  EXPECT_THAT(
      spawn.argv,
      ElementsAre("/opt/gradwire/bin/gradwire-server", "--address=127.0.0.1",
                  "--port=0", "--port-file=/run/shard-1.port", "--shard-id=1",
                  "--num-shards=2", "--num-workers=3",
                  "--metrics-address=127.0.0.1", "--metrics-port=0",
                  "--metrics-port-file=/run/shard-1.metrics-port",
                  "--checkpoint-dir=/ckpt/shard-1",
                  "--async-pull-deltas=per-worker", "--wal=true"));
  EXPECT_EQ(spawn.stdout_path, "/run/shard-1.log");
  EXPECT_EQ(spawn.stderr_path, "/run/shard-1.log");
  // The flags alone set the transport: no inherited GRADWIRE_TLS_CA, ...
  EXPECT_THAT(
      spawn.unset_env,
      ::testing::IsSupersetOf(
          {"GRADWIRE_TLS_CERT", "GRADWIRE_TLS_KEY", "GRADWIRE_TLS_CA",
           "GRADWIRE_TLS_REQUIRE_CLIENT_CERT", "GRADWIRE_AUTH_TOKEN_FILE"}));
}

TEST(WorkerCommandTest, WorkerZeroEvaluatesAndKeepsTheTerminal) {
  const RunDirectory run("/run");
  const SpawnOptions spawn =
      WorkerCommand(Options(), run, "127.0.0.1:1,127.0.0.1:2", 0, {"A=1"});
  EXPECT_THAT(
      spawn.argv,
      ElementsAre("/opt/gradwire/bin/gradwire-worker",
                  "--shards=127.0.0.1:1,127.0.0.1:2", "--worker-id=0",
                  "--num-workers=3", "--summary-json=/run/worker-0.json",
                  "--metrics-address=127.0.0.1", "--metrics-port=0",
                  "--metrics-port-file=/run/worker-0.metrics-port",
                  "--model=mlp"));
  EXPECT_EQ(spawn.stdout_path, "");
  EXPECT_EQ(spawn.stderr_path, "/run/worker-0.log");
  EXPECT_THAT(spawn.extra_env, ElementsAre("A=1"));
}

TEST(WorkerCommandTest, OtherWorkersSkipEvaluationBeforeTheUsersFlags) {
  LocalClusterOptions options = Options();
  options.worker_command = {"/usr/bin/python3", "train.py"};
  const SpawnOptions spawn =
      WorkerCommand(options, RunDirectory("/run"), "h:1", 2, {});
  ASSERT_GE(spawn.argv.size(), 4u);
  EXPECT_EQ(spawn.argv[0], "/usr/bin/python3");
  EXPECT_EQ(spawn.argv[1], "train.py");
  EXPECT_EQ(spawn.argv[spawn.argv.size() - 2], "--evaluate=false");
  EXPECT_EQ(spawn.argv.back(), "--model=mlp");
  EXPECT_EQ(spawn.stdout_path, "/run/worker-2.log");
}

TEST(WorkerCommandTest, TransportFlagsComeFromTheWorkersSettings) {
  LocalClusterOptions options = Options();
  options.transport = LocalTransportFrom("/certs", "");
  const SpawnOptions worker =
      WorkerCommand(options, RunDirectory("/run"), "h:1", 1, {});
  EXPECT_THAT(worker.argv, Contains("--tls-cert=/certs/client.pem"));
  EXPECT_THAT(worker.argv, Not(Contains("--tls-cert=/certs/server.pem")));
  const SpawnOptions shard = ShardCommand(options, RunDirectory("/run"), 0);
  EXPECT_THAT(shard.argv, Contains("--tls-cert=/certs/server.pem"));
}

TEST(WorkerCommandTest, EachWorkerSendsItsOwnTokenWhereTheDirectoryHasThem) {
  LocalClusterOptions options = Options();
  options.transport = LocalTransportFrom("/certs", "");
  options.transport.shard.worker_tokens_file = "/certs/worker-tokens";
  options.transport.worker_token_dir = "/certs";
  const SpawnOptions worker =
      WorkerCommand(options, RunDirectory("/run"), "h:1", 1, {});
  EXPECT_THAT(worker.argv, Contains("--auth-token-file=/certs/worker-token-1"));
  EXPECT_THAT(worker.argv,
              Not(Contains("--auth-token-file=/certs/auth-token")));
  const SpawnOptions shard = ShardCommand(options, RunDirectory("/run"), 0);
  EXPECT_THAT(shard.argv,
              Contains("--worker-tokens-file=/certs/worker-tokens"));
  EXPECT_THAT(shard.argv, Contains("--auth-token-file=/certs/auth-token"));
  // Without them (no worker-tokens file in /certs): the shared token.
  options.transport = LocalTransportFrom("/certs", "");
  EXPECT_THAT(WorkerCommand(options, RunDirectory("/run"), "h:1", 1, {}).argv,
              Contains("--auth-token-file=/certs/auth-token"));
}

TEST(WorkerEnvironmentTest, SharesTheCoresUnlessTheUserSetThreads) {
  unsetenv("OMP_NUM_THREADS");
  const std::vector<std::string> env = WorkerEnvironment(1 << 20);
  EXPECT_THAT(env, ElementsAre("OMP_NUM_THREADS=1"));
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_TRUE(WorkerEnvironment(2).empty());
  unsetenv("OMP_NUM_THREADS");
}

}  // namespace
}  // namespace gradwire::cli
