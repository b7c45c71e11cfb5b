// `gradwire local --compressor=auto`: two workers and two shards train
// with the choice made per layer each step, as a user runs it; and the
// settings it refuses.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

std::string CliBinary() {
  const char* binary = std::getenv("GRADWIRE_CLI_BIN");
  return binary != nullptr ? binary : "";
}

ExitedProcess RunCli(const std::vector<std::string>& args,
                     absl::Duration timeout) {
  absl::StatusOr<ExitedProcess> exited = RunToExit(CliBinary(), args, timeout);
  EXPECT_TRUE(exited.ok()) << exited.status();
  return exited.ok() ? *exited : ExitedProcess{};
}

// The numbers of the JSON array `"key": [a, b, ...]` in `json`.
std::vector<double> NumberArray(const std::string& json,
                                const std::string& key) {
  std::vector<double> values;
  // The CLI's summary writes nested members without spaces, the worker's
  // with.
  const std::string name = "\"" + key + "\":";
  const size_t at = json.find(name);
  if (at == std::string::npos) return values;
  const size_t start = json.find_first_not_of(' ', at + name.size()) + 1;
  if (json[start - 1] != '[') return values;
  const size_t end = json.find(']', start);
  for (absl::string_view item :
       absl::StrSplit(json.substr(start, end - start), ',')) {
    double value = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(item), &value)) {
      values.push_back(value);
    }
  }
  return values;
}

class AutoCompressionLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CliBinary().empty()) GTEST_SKIP() << "GRADWIRE_CLI_BIN is not set";
  }
  TempDir dir_;
};

TEST_F(AutoCompressionLocalTest, TwoWorkersTwoShardsTrain) {
  const std::string summary = dir_.path() + "/summary.json";
  // 1000 examples over 2 workers are 8 batches of 64 each: three epochs.
  const ExitedProcess run = RunCli(
      {"local", "--shards=2", "--workers=2", "--model=mlp", "--compressor=auto",
       "--epochs=3", "--train-limit=1000", "--test-limit=500",
       "--summary-json=" + summary, "--log-dir=" + dir_.path() + "/run"},
      absl::Seconds(100));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string json = ReadFileOrEmpty(summary);
  EXPECT_THAT(json, HasSubstr("\"compressor\": \"auto\""));
  const std::vector<double> loss = NumberArray(json, "epoch_loss");
  ASSERT_EQ(loss.size(), 3u) << json;
  EXPECT_LT(loss[2], loss[0]) << json;
  // The summary carries the choices, each a rung of the ladder.
  EXPECT_THAT(json, HasSubstr("\"auto_chosen_ratios\":"));
  const std::vector<double> link = NumberArray(json, "link_bytes_per_second");
  ASSERT_FALSE(link.empty()) << json;
  EXPECT_GT(link.back(), 0) << json;
}

TEST_F(AutoCompressionLocalTest, BadSettingsNameTheOption) {
  struct Case {
    std::vector<std::string> flags;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{"--compressor=auto", "--ratio=0.05"}, "--ratio"},
      {{"--compressor=auto", "--auto-budget=0"}, "--auto-budget"},
      {{"--compressor=auto", "--auto-budget=-2"}, "--auto-budget"},
      {{"--compressor=auto", "--error-feedback=false"}, "--error-feedback"},
      {{"--compressor=topk", "--auto-budget=2"}, "--auto-budget"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"local", "--shards=1", "--workers=1",
                                     "--log-dir=" + dir_.path() + "/bad"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const ExitedProcess run = RunCli(args, absl::Seconds(30));
    EXPECT_NE(run.exit_code, 0) << c.flags[1] << run.out << run.err;
    EXPECT_THAT(run.out + run.err, HasSubstr(c.named)) << c.flags[1];
  }
}

}  // namespace
}  // namespace gradwire::testing
