// The values of `gradwire run`'s options checked without flags: shard
// addresses, server arguments and the nodes of a run across hosts.
#include "cli/run_arguments.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RunArgumentsTest, ShardAddressesKeepTheirOrder) {
  auto parsed = ParseShardAddresses("ps-1:7001, 127.0.0.1:7000,[::1]:9");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre("ps-1:7001", "127.0.0.1:7000", "[::1]:9"));
}

TEST(RunArgumentsTest, BadShardAddressesAreNamed) {
  for (const char* bad :
       {"", "a:1,", "host", ":7000", "host:0", "host:65536", "host:x",
        "host:+7", "ho st:1", "[::1:7000", "dns:///a:1"}) {
    auto parsed = ParseShardAddresses(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("is not HOST:PORT"))
        << bad;
  }
  EXPECT_THAT(ParseShardAddresses("a:1,b:x").status().message(),
              HasSubstr("'b:x'"));
}

TEST(RunArgumentsTest, ServerArgsMustBeFlags) {
  auto words = SplitServerArgs("  --wal=true\t--staleness=2 ");
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(*words, ElementsAre("--wal=true", "--staleness=2"));
  EXPECT_TRUE(SplitServerArgs("")->empty());
  EXPECT_THAT(SplitServerArgs("--wal true").status().message(),
              HasSubstr("\"true\" is not a --flag"));
}

NodeOptions Nodes(int nnodes, int node_rank, const char* master_addr,
                  int master_port = 29500) {
  NodeOptions nodes;
  nodes.nnodes = nnodes;
  nodes.node_rank = node_rank;
  nodes.master_addr = master_addr;
  nodes.master_port = master_port;
  return nodes;
}

TEST(RunArgumentsTest, EveryNodeFindsTheShardsAboveTheMasterPort) {
  EXPECT_TRUE(CheckNodeOptions(Nodes(2, 1, "10.0.0.1", 29500), 2, 256).ok());
  EXPECT_THAT(NodeShardAddresses(Nodes(2, 1, "10.0.0.1", 29500), 2),
              ElementsAre("10.0.0.1:29501", "10.0.0.1:29502"));
  EXPECT_THAT(NodeShardAddresses(Nodes(3, 0, "node-0", 40000), 1),
              ElementsAre("node-0:40001"));
  // One node needs no master address.
  EXPECT_TRUE(CheckNodeOptions(Nodes(1, 0, ""), 1, 256).ok());
}

TEST(RunArgumentsTest, BadNodesNameTheirFix) {
  struct Case {
    NodeOptions nodes;
    const char* message;
  };
  const Case cases[] = {
      {Nodes(0, 0, "a"), "--nnodes: 0 is outside [1, 256]"},
      {Nodes(2, 2, "a"), "--node-rank: 2 is outside [0, 2)"},
      {Nodes(2, -1, "a"), "--node-rank: -1 is outside [0, 2)"},
      {Nodes(2, 0, ""), "--master-addr is required with --nnodes > 1"},
      {Nodes(2, 0, "a b"), "--master-addr: 'a b' is not a host"},
      {Nodes(2, 0, "a", 0), "--master-port: 0 is outside [1, 65533]"},
      {Nodes(2, 0, "a", 65534), "--master-port: 65534 is outside [1, 65533]"},
  };
  for (const Case& c : cases) {
    const absl::Status status = CheckNodeOptions(c.nodes, 2, 256);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace gradwire::cli
