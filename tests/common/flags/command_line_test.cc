#include "common/flags/command_line.h"

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, test_shard_id, 0, "A flag for the tests.");
ABSL_FLAG(std::string, test_address, "0.0.0.0", "Another one.");

namespace gradwire {
namespace {

using ::testing::HasSubstr;

constexpr absl::string_view kFlags[] = {"test_shard_id", "test_address",
                                        "not_a_flag"};

class FlagEnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("GRADWIRE_TEST_SHARD_ID");
    unsetenv("GRADWIRE_TEST_ADDRESS");
    absl::SetFlag(&FLAGS_test_shard_id, 0);
    absl::SetFlag(&FLAGS_test_address, "0.0.0.0");
  }
};

TEST_F(FlagEnvironmentTest, VariableNameIsPrefixedUpperCase) {
  EXPECT_EQ(FlagEnvironmentVariable("shard_id"), "GRADWIRE_SHARD_ID");
}

TEST_F(FlagEnvironmentTest, VariablesSetFlagsAndTheCommandLineWins) {
  setenv("GRADWIRE_TEST_SHARD_ID", "3", 1);
  setenv("GRADWIRE_TEST_ADDRESS", "10.0.0.1", 1);
  ASSERT_TRUE(ApplyFlagEnvironment(kFlags).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_shard_id), 3);
  char arg0[] = "test";
  char arg1[] = "--test_shard_id=5";
  char* argv[] = {arg0, arg1};
  absl::ParseCommandLine(2, argv);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_shard_id), 5);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_address), "10.0.0.1");
  EXPECT_THAT(FlagValues(kFlags), HasSubstr("--test-shard-id=5\n"
                                            "--test-address=10.0.0.1\n"));
}

TEST_F(FlagEnvironmentTest, BadValueNamesTheVariableAndKeepsTheFlag) {
  setenv("GRADWIRE_TEST_SHARD_ID", "three", 1);
  const absl::Status s = ApplyFlagEnvironment(kFlags);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("GRADWIRE_TEST_SHARD_ID='three'"));
  EXPECT_THAT(s.message(), HasSubstr("--test-shard-id"));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_shard_id), 0);
}

TEST_F(FlagEnvironmentTest, UnsetVariablesChangeNothing) {
  ASSERT_TRUE(ApplyFlagEnvironment(kFlags).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_shard_id), 0);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_address), "0.0.0.0");
}

}  // namespace
}  // namespace gradwire
