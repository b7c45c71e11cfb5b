// The environment contract of `gradwire run`: each worker's variables, and
// the transport variables it must not inherit.
#include "cli/run_environment.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using ::testing::Not;
using ::testing::StartsWith;

TEST(RunEnvironmentTest, EveryWorkerLearnsItsPlace) {
  unsetenv("PYTHONUNBUFFERED");
  unsetenv("GRADWIRE_METRICS_PORT");
  unsetenv("GRADWIRE_METRICS_ADDRESS");
  RunEnvironment run;
  run.world_size = 3;
  run.shards = {"127.0.0.1:7000", "127.0.0.1:7001"};
  run.run_dir = "/runs/a";
  const std::vector<std::string> env = WorkerVariables(run, 2);
  EXPECT_THAT(env,
              IsSupersetOf({"GRADWIRE_SHARDS=127.0.0.1:7000,127.0.0.1:7001",
                            "RANK=2", "WORLD_SIZE=3", "LOCAL_RANK=0",
                            "LOCAL_WORLD_SIZE=1", "GRADWIRE_RUN_DIR=/runs/a",
                            "GRADWIRE_SUMMARY_JSON=/runs/a/worker-2.json",
                            "PYTHONUNBUFFERED=1", "GRADWIRE_METRICS_PORT=0",
                            "GRADWIRE_METRICS_ADDRESS=127.0.0.1",
                            "GRADWIRE_METRICS_PORT_FILE=/runs/a/"
                            "worker-2.metrics-port"}));
  EXPECT_THAT(env, Not(Contains(StartsWith("GRADWIRE_TLS_"))));
  EXPECT_THAT(env, Not(Contains(StartsWith("GRADWIRE_AUTH_TOKEN_FILE="))));
  EXPECT_THAT(env,
              Not(Contains(StartsWith("GRADWIRE_METRICS_LINGER_SECONDS="))));
  EXPECT_THAT(
      UnsetTransportVariables(run),
      ElementsAre("GRADWIRE_TLS_CA", "GRADWIRE_TLS_CERT", "GRADWIRE_TLS_KEY",
                  "GRADWIRE_TLS_SERVER_NAME", "GRADWIRE_AUTH_TOKEN_FILE",
                  "GRADWIRE_ALLOW_INSECURE_TOKEN"));
}

// Without nodes, every worker is a node of its own, next to a rank 0 on
// this host.
TEST(RunEnvironmentTest, OneNodeSetsTorchrunsMaster) {
  RunEnvironment run;
  run.world_size = 2;
  run.master_port = 4321;
  const std::vector<std::string> env = WorkerVariables(run, 1);
  EXPECT_THAT(env, IsSupersetOf({"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                 "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=4321"}));
  EXPECT_THAT(env, Not(Contains(StartsWith("GRADWIRE_LOCAL_STORE="))));
}

// Node 1 of two, with two workers each: ranks 2 and 3, one local group.
TEST(RunEnvironmentTest, NodesNumberTheirWorkersAsTorchrunDoes) {
  RunEnvironment run;
  run.world_size = 4;
  run.node_rank = 1;
  run.node_workers = 2;
  run.local_group = true;
  run.master_addr = "10.0.0.1";
  run.master_port = 29500;
  run.local_store = "127.0.0.1:41000";
  run.shards = {"10.0.0.1:29501"};
  run.run_dir = "/runs/c";
  const std::vector<std::string> env = WorkerVariables(run, 1);
  EXPECT_THAT(
      env,
      IsSupersetOf({"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",
                    "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=10.0.0.1",
                    "MASTER_PORT=29500", "GRADWIRE_LOCAL_STORE=127.0.0.1:41000",
                    "GRADWIRE_SHARDS=10.0.0.1:29501",
                    "GRADWIRE_SUMMARY_JSON=/runs/c/worker-1.json"}));
  EXPECT_THAT(WorkerVariables(run, 0),
              IsSupersetOf({"RANK=2", "LOCAL_RANK=0"}));
}

TEST(RunEnvironmentTest, TransportVariablesOnlyWhenInUse) {
  setenv("PYTHONUNBUFFERED", "0", 1);
  RunEnvironment run;
  run.transport.tls_ca = "/certs/ca.pem";
  run.transport.auth_token_file = "/certs/auth-token";
  const std::vector<std::string> env = WorkerVariables(run, 0);
  EXPECT_THAT(env,
              IsSupersetOf({"GRADWIRE_TLS_CA=/certs/ca.pem",
                            "GRADWIRE_AUTH_TOKEN_FILE=/certs/auth-token"}));
  // An inherited setting is the user's: kept.
  EXPECT_THAT(env, Not(Contains(StartsWith("PYTHONUNBUFFERED="))));
  EXPECT_THAT(
      UnsetTransportVariables(run),
      ElementsAre("GRADWIRE_TLS_CERT", "GRADWIRE_TLS_KEY",
                  "GRADWIRE_TLS_SERVER_NAME", "GRADWIRE_ALLOW_INSECURE_TOKEN"));
  unsetenv("PYTHONUNBUFFERED");
}

TEST(RunEnvironmentTest, AnInheritedMetricsPortIsTheUsers) {
  setenv("GRADWIRE_METRICS_PORT", "-1", 1);
  RunEnvironment run;
  run.run_dir = "/runs/b";
  const std::vector<std::string> env = WorkerVariables(run, 1);
  EXPECT_THAT(env, Not(Contains(StartsWith("GRADWIRE_METRICS_PORT="))));
  EXPECT_THAT(env, Contains("GRADWIRE_METRICS_PORT_FILE=/runs/b/"
                            "worker-1.metrics-port"));
  unsetenv("GRADWIRE_METRICS_PORT");
}

// With the dashboard, the workers keep /metrics up for its last scrapes,
// unless the user chose how long.
TEST(RunEnvironmentTest, TheDashboardsLingerUnlessInherited) {
  unsetenv("GRADWIRE_METRICS_LINGER_SECONDS");
  RunEnvironment run;
  run.metrics_linger_seconds = 12;
  EXPECT_THAT(WorkerVariables(run, 0),
              Contains("GRADWIRE_METRICS_LINGER_SECONDS=12"));
  setenv("GRADWIRE_METRICS_LINGER_SECONDS", "30", 1);
  EXPECT_THAT(WorkerVariables(run, 0),
              Not(Contains(StartsWith("GRADWIRE_METRICS_LINGER_SECONDS="))));
  unsetenv("GRADWIRE_METRICS_LINGER_SECONDS");
}

TEST(RunEnvironmentTest, AnInsecureTokenIsPassedOnWhenAllowed) {
  RunEnvironment run;
  run.transport.auth_token_file = "/certs/auth-token";
  run.transport.allow_insecure_token = true;
  EXPECT_THAT(WorkerVariables(run, 0),
              IsSupersetOf({"GRADWIRE_AUTH_TOKEN_FILE=/certs/auth-token",
                            "GRADWIRE_ALLOW_INSECURE_TOKEN=1"}));
  EXPECT_THAT(UnsetTransportVariables(run),
              Not(Contains("GRADWIRE_ALLOW_INSECURE_TOKEN")));
}

}  // namespace
}  // namespace gradwire::cli
