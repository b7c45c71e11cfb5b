// The values of `gradwire run`'s options checked without flags: shard
// addresses and server arguments.
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

}  // namespace
}  // namespace gradwire::cli
