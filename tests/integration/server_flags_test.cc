// gradwire-server's command line: --help lists every flag with its default
// and exits 0; a bad value exits 2 with a message before anything binds.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

TEST(ServerFlagsTest, HelpListsEveryFlagWithItsDefault) {
  auto run = RunServerToExit({"--help"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->err;
  for (const char* flag :
       {"--address (default: 0.0.0.0)", "--port (default: 0)", "--port-file",
        "--shard-id (default: 0)", "--num-shards (default: 1)",
        "--num-workers (default: 0)", "--mode", "--staleness (default: 0)",
        "--checkpoint-dir", "--checkpoint-every (default: 0)",
        "--threads (default: 0)", "--pull-threads (default: 0)",
        "--apply-threads (default: -1)",
        "--max-concurrent-streams (default: 100)",
        "--memory-quota-bytes (default: 1073741824)",
        "--max-message-bytes (default: 67108864)",
        "--shutdown-grace-seconds (default: 10)",
        "--init-preferred-grace-seconds (default: 1)",
        "--worker-timeout-seconds (default: 30)"}) {
    EXPECT_NE(run->out.find(flag), std::string::npos) << flag << "\n"
                                                      << run->out;
  }
}

struct BadFlags {
  std::vector<std::string> args;
  std::string message;
};

class ServerBadFlagsTest : public ::testing::TestWithParam<BadFlags> {};

TEST_P(ServerBadFlagsTest, ExitsTwoWithAMessage) {
  auto run = RunServerToExit(GetParam().args);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 2) << run->err;
  EXPECT_NE(run->err.find(GetParam().message), std::string::npos) << run->err;
  // It never got to listen.
  EXPECT_EQ(run->out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Values, ServerBadFlagsTest,
    ::testing::Values(
        BadFlags{{"--shard-id=3", "--num-shards=2"}, "--shard-id=3"},
        BadFlags{{"--mode=foo"}, "--mode=foo"},
        BadFlags{{"--num-shards=0"}, "--num-shards=0"},
        BadFlags{{"--port=70000"}, "--port=70000"},
        BadFlags{{"--num-workers=-1"}, "--num-workers=-1"},
        BadFlags{{"--max-message-bytes=0"}, "--max-message-bytes=0"},
        BadFlags{{"--checkpoint-every=-5", "--checkpoint-dir=/tmp/x"},
                 "--checkpoint-every=-5"},
        BadFlags{{"--checkpoint-every=5"}, "needs --checkpoint-dir"},
        BadFlags{{"--staleness=2", "--mode=bsp"}, "--staleness=2"},
        BadFlags{{"--threads=-1"}, "--threads=-1"},
        BadFlags{{"--pull-threads=-1"}, "--pull-threads=-1"},
        BadFlags{{"--apply-threads=-2"}, "--apply-threads=-2"},
        BadFlags{{"--apply-threads=1025"}, "--apply-threads=1025"},
        BadFlags{{"--shutdown-grace-seconds=-1"}, "--shutdown-grace-seconds"},
        BadFlags{{"--init-preferred-grace-seconds=-1"},
                 "--init-preferred-grace-seconds=-1: must be in [0, 3600]"},
        BadFlags{{"--init-preferred-grace-seconds=nan"},
                 "--init-preferred-grace-seconds=nan"},
        BadFlags{{"--worker-timeout-seconds=-1"},
                 "--worker-timeout-seconds=-1: must be in [0, 86400]"},
        BadFlags{{"--worker-timeout-seconds=1e6"},
                 "--worker-timeout-seconds=1e+06"},
        BadFlags{{"--port=abc"}, "Illegal value 'abc'"},
        BadFlags{{"--no-such-flag=1"}, "no_such_flag"},
        BadFlags{{"stray"}, "unexpected argument 'stray'"}));

TEST(ServerFlagsTest, BoundedThreadPoolServes) {
  auto server = ServerProcess::Start({"--threads=4", "--address=127.0.0.1"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(CheckHealth((*server)->NewChannel(), "").value_or(-1), 1);
}

TEST(ServerFlagsTest, PortInUseFailsWithExitOne) {
  auto first = ServerProcess::Start({"--address=127.0.0.1"});
  ASSERT_TRUE(first.ok()) << first.status();
  auto run = RunServerToExit(
      {"--address=127.0.0.1", "--port=" + std::to_string((*first)->port())});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 1) << run->err;
  EXPECT_NE(run->err.find("cannot listen"), std::string::npos) << run->err;
}

}  // namespace
}  // namespace gradwire::testing
