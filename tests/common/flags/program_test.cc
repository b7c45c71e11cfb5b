// The shared command-line handling, run as the binaries run it: each case
// parses a command line in a child process (a death test) and checks the
// exit code and what was printed.
#include "common/flags/program.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags/command_line.h"
#include "common/flags/metrics_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, program_test_steps, 1, "A flag of the program under test.");

namespace gradwire {
namespace {

using ::testing::ExitedWithCode;

constexpr absl::string_view kOwnFlags[] = {"program_test_steps"};

// Parses `args` as the program "prog" would, then prints its steps and
// exits 0; --dry-run exits inside.
[[noreturn]] void RunProgram(std::vector<std::string> args) {
  static const std::vector<absl::string_view> names =
      JoinFlagNames({kOwnFlags, kMetricsFlagNames, kDryRunFlagNames});
  const ProgramFlags program = {"prog", "prog: a test program.", names};
  std::vector<char*> argv = {const_cast<char*>("prog")};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ParseFlagsOrExit(program, static_cast<int>(argv.size()) - 1, argv.data());
  if (absl::Status s = ValidateMetricsEndpoint(MetricsEndpointFromFlags());
      !s.ok()) {
    ExitWithUsageError(program, s);
  }
  ExitAfterDryRunIfRequested(program);
  std::fprintf(stderr, "steps=%d\n", absl::GetFlag(FLAGS_program_test_steps));
  std::exit(0);
}

TEST(ProgramFlagsTest, HyphenatedFlagsParse) {
  EXPECT_EXIT(RunProgram({"--program-test-steps=7"}), ExitedWithCode(0),
              "steps=7");
}

TEST(ProgramFlagsTest, EnvironmentSetsAFlagAndTheCommandLineWins) {
  EXPECT_EXIT(
      {
        setenv("GRADWIRE_PROGRAM_TEST_STEPS", "5", 1);
        RunProgram({});
      },
      ExitedWithCode(0), "steps=5");
  EXPECT_EXIT(
      {
        setenv("GRADWIRE_PROGRAM_TEST_STEPS", "5", 1);
        RunProgram({"--program-test-steps=9"});
      },
      ExitedWithCode(0), "steps=9");
}

TEST(ProgramFlagsTest, UsageErrorsExitWithTheUsageCode) {
  EXPECT_EXIT(RunProgram({"--no-such-flag=1"}), ExitedWithCode(kUsageExitCode),
              "no-such-flag|no_such_flag");
  EXPECT_EXIT(RunProgram({"--program-test-steps=many"}),
              ExitedWithCode(kUsageExitCode), "many");
  EXPECT_EXIT(RunProgram({"stray"}), ExitedWithCode(kUsageExitCode),
              "prog: unexpected argument 'stray' \\(see --help\\)");
  EXPECT_EXIT(
      {
        setenv("GRADWIRE_PROGRAM_TEST_STEPS", "x", 1);
        RunProgram({});
      },
      ExitedWithCode(kUsageExitCode), "GRADWIRE_PROGRAM_TEST_STEPS");
  EXPECT_EXIT(RunProgram({"--metrics-port=70000"}),
              ExitedWithCode(kUsageExitCode), "--metrics-port=70000");
}

TEST(ProgramFlagsTest, DryRunPrintsEveryFlagAndExitsZero) {
  // The values go to stdout; the death test sees stderr, so they are
  // checked through a file.
  const std::string out = ::testing::TempDir() + "/dry_run.txt";
  EXPECT_EXIT(
      {
        if (std::freopen(out.c_str(), "w", stdout) == nullptr) std::exit(3);
        RunProgram({"--dry-run", "--program-test-steps=4"});
      },
      ExitedWithCode(0), "");
  std::FILE* f = std::fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  EXPECT_EQ(text,
            "--program-test-steps=4\n--metrics-address=0.0.0.0\n"
            "--metrics-port=0\n--metrics-port-file=\n--dry-run=true\n");
}

TEST(MetricsEndpointTest, ValidationNamesTheFlag) {
  MetricsEndpointSettings s;
  EXPECT_TRUE(ValidateMetricsEndpoint(s).ok());
  s.port = kMetricsOff;
  EXPECT_TRUE(ValidateMetricsEndpoint(s).ok());
  s.port_file = "/tmp/port";
  EXPECT_THAT(ValidateMetricsEndpoint(s).message(),
              ::testing::HasSubstr("--metrics-port-file"));
  s = MetricsEndpointSettings();
  s.address = "localhost";
  EXPECT_THAT(ValidateMetricsEndpoint(s).message(),
              ::testing::HasSubstr("--metrics-address=localhost"));
  s = MetricsEndpointSettings();
  s.port = -2;
  EXPECT_EQ(ValidateMetricsEndpoint(s).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gradwire
