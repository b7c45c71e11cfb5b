// SyncOptionsFromSettings: what each setting resolves to, and an error that
// names the setting the way its front end spells it.
#include "worker/sync_settings.h"

#include <string>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(SyncSettingsTest, DefaultsResolve) {
  const absl::StatusOr<SyncOptions> options =
      SyncOptionsFromSettings(SyncSettings());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compressor.name, "topk");
  EXPECT_EQ(options->training.mode(), v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(options->training.optimizer().kind(), v1::OPTIMIZER_KIND_MOMENTUM);
  EXPECT_TRUE(options->pull_deltas);
  EXPECT_EQ(options->shard_addresses.size(), 1u);
}

TEST(SyncSettingsTest, NamesResolveToTheirConfigs) {
  SyncSettings s;
  s.optimizer = "nesterov";
  s.mode = "ssp";
  s.staleness = 4;
  s.pull = "dense";
  s.value_type = "bf16";
  s.shards = {"a:1", "", "b:2"};
  s.pull_timeout_seconds = 7;
  const absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->training.optimizer().nesterov());
  EXPECT_EQ(options->training.staleness(), 4u);
  EXPECT_FALSE(options->pull_deltas);
  EXPECT_EQ(options->compressor.precision, ValuePrecision::kBf16);
  EXPECT_EQ(options->shard_addresses, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(options->client.pull_timeout, absl::Seconds(7));
}

// Each bad setting is refused with a message that starts with its name.
TEST(SyncSettingsTest, BadValuesNameTheirSetting) {
  struct Case {
    std::string key;
    void (*spoil)(SyncSettings*);
  };
  const Case cases[] = {
      {"shards", [](SyncSettings* s) { s->shards.clear(); }},
      {"num_workers", [](SyncSettings* s) { s->num_workers = 0; }},
      {"worker_id", [](SyncSettings* s) { s->worker_id = 1; }},
      {"local_rank", [](SyncSettings* s) { s->local_rank = 2; }},
      {"local_store", [](SyncSettings* s) { s->local_store = "x"; }},
      {"compressor", [](SyncSettings* s) { s->compressor = "zip"; }},
      {"ratio", [](SyncSettings* s) { s->ratio = 0; }},
      {"threshold", [](SyncSettings* s) { s->threshold = -1; }},
      {"connect_timeout_seconds",
       [](SyncSettings* s) { s->connect_timeout_seconds = 0; }},
      {"levels", [](SyncSettings* s) { s->levels = 0; }},
      {"value_type", [](SyncSettings* s) { s->value_type = "fp8"; }},
      {"error_feedback",
       [](SyncSettings* s) {
         s->compressor = "dgc";
         s->error_feedback = false;
       }},
      {"optimizer", [](SyncSettings* s) { s->optimizer = "lion"; }},
      {"lr", [](SyncSettings* s) { s->lr = -0.1; }},
      {"momentum", [](SyncSettings* s) { s->momentum = 1; }},
      {"weight_decay", [](SyncSettings* s) { s->weight_decay = -1; }},
      {"mode", [](SyncSettings* s) { s->mode = "eventual"; }},
      {"staleness",
       [](SyncSettings* s) {
         s->mode = "ssp";
         s->staleness = -1;
       }},
      {"pull", [](SyncSettings* s) { s->pull = "never"; }},
      {"pull_ratio", [](SyncSettings* s) { s->pull_ratio = 0; }},
      {"partition_bytes", [](SyncSettings* s) { s->partition_bytes = 6; }},
      {"rpc_timeout_seconds",
       [](SyncSettings* s) { s->rpc_timeout_seconds = 0; }},
      {"pull_timeout_seconds",
       [](SyncSettings* s) { s->pull_timeout_seconds = -1; }},
  };
  for (const Case& c : cases) {
    SyncSettings s;
    c.spoil(&s);
    const absl::Status flag = SyncOptionsFromSettings(s).status();
    EXPECT_EQ(flag.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(flag.message().rfind(FlagName(c.key), 0), 0u) << flag;
    const absl::Status keyword =
        SyncOptionsFromSettings(s, [](absl::string_view key) {
          return std::string(key);
        }).status();
    EXPECT_EQ(keyword.message().rfind(c.key + ":", 0), 0u) << keyword;
  }
}

TEST(SyncSettingsTest, FlagNameSpellsLikeTheCommandLine) {
  EXPECT_EQ(FlagName("value_type"), "--value-type");
  EXPECT_EQ(FlagName("lr"), "--lr");
}

}  // namespace
}  // namespace gradwire
