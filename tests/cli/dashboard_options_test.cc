// The checks of the dashboard's flags, shared by `gradwire local` and
// `gradwire run`: what --dashboard asks for, and each bad value named.
#include "cli/dashboard_options.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;

class DashboardOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    consoles_ = ::testing::TempDir() + "/dashboard_options_test/consoles";
    std::filesystem::create_directories(consoles_ + "/lib");
    std::ofstream(consoles_ + "/gradwire.html") << "<html>";
    std::ofstream(consoles_ + "/lib/gradwire.lib") << "{{ define }}";
  }
  void TearDown() override {
    std::filesystem::remove_all(::testing::TempDir() +
                                "/dashboard_options_test");
  }
  // --dashboard with the values that work, given on the command line.
  DashboardFlags On() const {
    DashboardFlags flags;
    flags.dashboard = true;
    flags.prometheus = "/bin/sh";
    flags.console_candidates = {"/no/such/consoles", consoles_};
    return flags;
  }
  absl::StatusOr<DashboardOptions> From(const DashboardFlags& flags) const {
    return DashboardOptionsFrom(flags, [this](absl::string_view name) {
      return given_.count(std::string(name)) > 0;
    });
  }

  std::string consoles_;
  std::set<std::string> given_;
};

TEST_F(DashboardOptionsTest, OffByDefault) {
  absl::StatusOr<DashboardOptions> off = From(DashboardFlags());
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->enabled);
}

TEST_F(DashboardOptionsTest, TheValuesGivenAndTheFirstConsolesFound) {
  DashboardFlags flags = On();
  flags.port = 9090;
  flags.linger_seconds = 2.5;
  absl::StatusOr<DashboardOptions> on = From(flags);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->enabled);
  EXPECT_EQ(on->prometheus, "/bin/sh");
  EXPECT_EQ(on->consoles, consoles_);
  EXPECT_EQ(on->port, 9090);
  EXPECT_EQ(on->linger, absl::Milliseconds(2500));
}

// Each flag that only the dashboard reads is refused alone, by its name.
TEST_F(DashboardOptionsTest, ItsFlagsNeedTheDashboard) {
  for (const char* name : {"dashboard_port", "dashboard_linger_seconds",
                           "prometheus", "dashboard_consoles"}) {
    given_ = {name};
    const absl::Status refused = From(DashboardFlags()).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << name;
    std::string dashed = std::string("--") + name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    EXPECT_EQ(refused.message(), dashed + " needs --dashboard");
  }
}

TEST_F(DashboardOptionsTest, BadValuesAreNamed) {
  const struct {
    int64_t port;
    double linger_seconds;
    const char* message;
  } cases[] = {
      {-1, 60, "--dashboard-port: -1 is outside [0, 65535]"},
      {65536, 60, "--dashboard-port: 65536 is outside [0, 65535]"},
      {0, -1, "--dashboard-linger-seconds: -1 is outside [0, 86400]"},
      {0, 86401, "--dashboard-linger-seconds: 86401 is outside [0, 86400]"},
      {0, std::nan(""), "--dashboard-linger-seconds: nan is outside"},
  };
  for (const auto& c : cases) {
    DashboardFlags flags = On();
    flags.port = c.port;
    flags.linger_seconds = c.linger_seconds;
    const absl::Status refused = From(flags).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(refused.message(), HasSubstr(c.message));
  }
}

TEST_F(DashboardOptionsTest, PrometheusAndTheConsolesMustBeThere) {
  DashboardFlags flags = On();
  flags.prometheus = "gradwire-no-such-prometheus";
  EXPECT_THAT(From(flags).status().message(),
              HasSubstr("--dashboard needs Prometheus: "));
  EXPECT_THAT(From(flags).status().message(),
              HasSubstr("apt-get install prometheus"));
  flags = On();
  flags.consoles = "/no/such/consoles";
  EXPECT_EQ(From(flags).status().message(),
            "--dashboard-consoles: /no/such/consoles holds no gradwire.html "
            "and lib/gradwire.lib");
  flags = On();
  flags.console_candidates = {"/no/a", "/no/b"};
  EXPECT_EQ(From(flags).status().message(),
            "--dashboard: no console templates in /no/a, /no/b (give "
            "--dashboard-consoles=DIR)");
  EXPECT_TRUE(HasConsoles(consoles_));
  EXPECT_FALSE(HasConsoles(consoles_ + "/lib"));
}

}  // namespace
}  // namespace gradwire::cli
