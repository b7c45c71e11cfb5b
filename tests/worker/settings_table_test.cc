// The table of settings: its entries are well formed, its bounds are what
// SyncOptionsFromSettings checks, and the texts made from it.
#include "worker/settings_table.h"

#include <cmath>
#include <set>
#include <string>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "cli/run_environment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/settings_reference.h"
#include "worker/sync_settings.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(SettingsTableTest, EntriesAreWellFormed) {
  std::set<std::string> names;
  for (const SettingInfo& info : SettingInfos()) {
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    for (char c : info.name) {
      EXPECT_TRUE(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')
          << info.name;
    }
    EXPECT_FALSE(info.group.empty()) << info.name;
    EXPECT_FALSE(info.help.empty()) << info.name;
    EXPECT_EQ(FindSetting(info.name), &info);
  }
  EXPECT_EQ(FindSetting("no_such_setting"), nullptr);
}

TEST(SettingsTableTest, EveryDefaultIsInItsRange) {
  EXPECT_TRUE(SyncOptionsFromSettings(SyncSettings()).ok());
  const SyncSettings defaults;
  ForEachSetting(defaults, [](const SettingInfo& info, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const double x = static_cast<double>(v);
      const SettingRange& r = info.range;
      EXPECT_TRUE(r.min_open ? x > r.min : x >= r.min) << info.name;
      EXPECT_TRUE(r.max_open ? x < r.max : x <= r.max) << info.name;
    }
  });
}

// Each bound of the table is checked: a value just past it is
// INVALID_ARGUMENT naming the setting.
TEST(SettingsTableTest, ValuesPastABoundNameTheirSetting) {
  int checked = 0;
  for (const SettingInfo& info : SettingInfos()) {
    if (info.range.conditional || !info.range.bounded()) continue;
    for (const double past : {info.range.min - 1, info.range.max + 1}) {
      if (std::isinf(past)) continue;
      SyncSettings s;
      ForEachSetting(s, [&](const SettingInfo& entry, auto& field) {
        using T = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          if (&entry == &info) field = static_cast<T>(past);
        }
      });
      const absl::Status status = SyncOptionsFromSettings(s).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << info.name;
      EXPECT_THAT(std::string(status.message()),
                  StartsWith(FlagName(info.name) + ": "));
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(SettingsTableTest, ChoicesAreChecked) {
  SyncSettings s;
  s.mode = "eventual";
  EXPECT_EQ(SyncOptionsFromSettings(s).status().message(),
            "--mode: 'eventual' is not bsp, asp or ssp");
}

TEST(SettingsTableTest, RangesReadAsIntervals) {
  EXPECT_EQ(DescribeRange(*FindSetting("ratio")), "(0, 1]");
  EXPECT_EQ(DescribeRange(*FindSetting("momentum")), "[0, 1)");
  EXPECT_EQ(DescribeRange(*FindSetting("levels")), "[1, 65535]");
  EXPECT_EQ(DescribeRange(*FindSetting("min_kept")), ">= 1");
  EXPECT_EQ(DescribeRange(*FindSetting("mode")), "bsp, asp, ssp");
  EXPECT_EQ(DescribeRange(*FindSetting("error_feedback")), "");
}

TEST(SettingsTableTest, NamesNearAKnownOneFindIt) {
  EXPECT_EQ(ClosestSettingName("compresor"), "compressor");
  EXPECT_EQ(ClosestSettingName("pull_ration"), "pull_ratio");
  EXPECT_EQ(SettingEnvironmentVariable("local_store"), "GRADWIRE_LOCAL_STORE");
}

// `gradwire run` sets the variables of the settings the table marks
// kRunEnvironment (cli/run_environment.h), all but the c10d store, which a
// run's one-process workers do not use.
TEST(SettingsTableTest, TheLauncherSetsTheTablesVariables) {
  const std::set<std::string> launcher = {cli::kShardsVariable,
                                          cli::kTlsCaVariable,
                                          cli::kTlsCertVariable,
                                          cli::kTlsKeyVariable,
                                          cli::kTlsServerNameVariable,
                                          cli::kAuthTokenFileVariable,
                                          cli::kAllowInsecureTokenVariable};
  std::set<std::string> table;
  for (const SettingInfo& info : SettingInfos()) {
    if ((info.front_ends & kRunEnvironment) && info.name != "local_store") {
      table.insert(SettingEnvironmentVariable(info.name));
    }
  }
  EXPECT_EQ(table, launcher);
}

TEST(SettingsTableTest, DefaultsReadAsTheFlagsTakeThem) {
  EXPECT_EQ(SettingDefault("shards"), "\"127.0.0.1:7000\"");
  EXPECT_EQ(SettingDefault("ratio"), "0.01");
  EXPECT_EQ(SettingDefault("error_feedback"), "true");
  EXPECT_EQ(SettingDefault("partition_bytes"), "4194304");
  EXPECT_EQ(SettingDefault("tls_ca"), "\"\"");
  EXPECT_EQ(SettingDefault("nothing"), "");
}

TEST(SettingsTableTest, TheStartLineNamesWhatDiffersFromTheDefaults) {
  SyncSettings s;
  EXPECT_EQ(DescribeSettings(s), "settings: defaults");
  s.compressor = "onebit";
  s.error_feedback = false;
  s.transport.tls_ca = "/ca.pem";
  EXPECT_EQ(DescribeSettings(s),
            "settings: compressor=\"onebit\" error_feedback=false");
}

TEST(SettingsTableTest, TheReferenceListsEverySetting) {
  const std::string page = SettingsReferenceMarkdown();
  for (const SettingInfo& info : SettingInfos()) {
    EXPECT_THAT(page, HasSubstr("| `" + std::string(info.name) + "` |"));
  }
  EXPECT_THAT(page, HasSubstr(std::string(kSettingsDocCommand)));
  EXPECT_THAT(page, HasSubstr("env `GRADWIRE_SHARDS`"));
  EXPECT_THAT(page, HasSubstr("\\|g\\|"));  // '|' escaped in a cell
}

}  // namespace
}  // namespace gradwire
