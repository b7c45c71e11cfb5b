// SyncOptionsFromSettings: what each setting resolves to, and an error that
// names the setting the way its front end spells it.
#include "worker/sync_settings.h"

#include <cstdlib>
#include <string>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(SyncSettingsTest, DefaultsResolve) {
  const absl::StatusOr<SyncOptions> options =
      SyncOptionsFromSettings(SyncSettings());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compressor.name, "topk");
  EXPECT_EQ(options->compressor.min_kept, 64u);
  EXPECT_EQ(options->training.mode(), v1::CONSISTENCY_MODE_BSP);
  // Top-K: momentum on the worker, before compression; SGD on the shards.
  EXPECT_EQ(options->training.optimizer().kind(), v1::OPTIMIZER_KIND_SGD);
  EXPECT_FLOAT_EQ(options->worker_momentum.momentum, 0.9f);
  EXPECT_NEAR(options->training.optimizer().learning_rate(), 0.05, 1e-9);
  EXPECT_TRUE(options->pull_deltas);
  EXPECT_EQ(options->shard_addresses.size(), 1u);
  EXPECT_TRUE(options->residual_spare);
  SyncSettings no_spare;
  no_spare.residual_spare = false;
  const absl::StatusOr<SyncOptions> without = SyncOptionsFromSettings(no_spare);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->residual_spare);
}

// An empty local_store sits one port above MASTER_PORT (29500 when unset),
// so that the node's store never takes torchrun's or the script's own.
TEST(SyncSettingsTest, LocalStoreDefaultsNextToMasterPort) {
  unsetenv("MASTER_PORT");
  absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(SyncSettings());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->local.store_host, "127.0.0.1");
  EXPECT_EQ(options->local.store_port, 29501);
  setenv("MASTER_PORT", "23456", 1);
  options = SyncOptionsFromSettings(SyncSettings());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->local.store_port, 23457);
  SyncSettings explicit_store;
  explicit_store.local_store = "10.0.0.1:4000";
  options = SyncOptionsFromSettings(explicit_store);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->local.store_host, "10.0.0.1");
  EXPECT_EQ(options->local.store_port, 4000);
  setenv("MASTER_PORT", "many", 1);
  EXPECT_THAT(
      std::string(SyncOptionsFromSettings(SyncSettings()).status().message()),
      ::testing::HasSubstr("MASTER_PORT=many"));
  unsetenv("MASTER_PORT");
}

// Pulls shrink as much as pushes by default: Top-K deltas at the push's
// ratio (at least kMinAutoPullRatio) with fp16 values; beside a compressor
// that keeps every element, at kDenseCompressorPullRatio; an explicit
// ratio and precision win.
TEST(SyncSettingsTest, DeltaPullsMatchThePushByDefault) {
  SyncSettings s;
  s.ratio = 0.02;
  absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->training.pull_encoding().compressor(), "topk");
  EXPECT_DOUBLE_EQ(options->training.pull_encoding().ratio(), 0.02);
  EXPECT_EQ(options->training.pull_encoding().value_type(),
            v1::VALUE_TYPE_FP16);

  // Below kMinAutoPullRatio (DGC's 0.1%), pulls keep that much.
  s.compressor = "dgc";
  s.ratio = 0.001;
  options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->training.pull_encoding().ratio(),
                   kMinAutoPullRatio);

  s.compressor = "qsgd";
  options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->training.pull_encoding().ratio(),
                   kDenseCompressorPullRatio);

  s.pull_ratio = 0.1;
  s.pull_value_type = "fp32";
  options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->training.pull_encoding().ratio(), 0.1);
  EXPECT_EQ(options->training.pull_encoding().value_type(),
            v1::VALUE_TYPE_FP32);
}

// "none" is no compression either way: fp32 pushes whatever value_type
// says, and pull "auto" means dense weights beside it.
TEST(SyncSettingsTest, NoneIsLosslessBothWays) {
  SyncSettings s;
  s.compressor = "none";
  s.value_type = "fp16";
  const absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compressor.precision, ValuePrecision::kFp32);
  EXPECT_FALSE(options->pull_deltas);
}

// Pull "exact": every changed element at fp32 (the nonzero compressor),
// whatever the push.
TEST(SyncSettingsTest, ExactPullsSendEveryChangedElementAtFp32) {
  SyncSettings s;
  s.pull = "exact";
  s.pull_value_type = "fp16";
  const absl::StatusOr<SyncOptions> options = SyncOptionsFromSettings(s);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->pull_deltas);
  EXPECT_EQ(options->training.pull_encoding().compressor(), "nonzero");
  EXPECT_EQ(options->training.pull_encoding().value_type(),
            v1::VALUE_TYPE_FP32);
  s.pull = "lossless";
  const absl::StatusOr<SyncOptions> bad = SyncOptionsFromSettings(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("pull"));
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
  EXPECT_TRUE(options->worker_momentum.nesterov);
  EXPECT_EQ(options->training.staleness(), 4u);
  EXPECT_FALSE(options->pull_deltas);
  EXPECT_EQ(options->compressor.precision, ValuePrecision::kBf16);
  EXPECT_EQ(options->shard_addresses, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(options->client.pull_timeout, absl::Seconds(7));
}

// Each bad setting is refused with a message that starts with its name.
// Where momentum runs, for each optimizer, compressor and mode.
TEST(SyncSettingsTest, MomentumRunsWhereCompressionKeepsItsAccuracy) {
  SyncSettings s;
  s.compressor = "none";
  absl::StatusOr<SyncOptions> o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  // Uncompressed BSP: on the shards, where it is exact.
  EXPECT_EQ(o->training.optimizer().kind(), v1::OPTIMIZER_KIND_MOMENTUM);
  EXPECT_FALSE(o->worker_momentum.enabled());
  EXPECT_EQ(o->folded_momentum, 0.0f);
  EXPECT_EQ(DescribeOptimizerPlacement(*o),
            "optimizer: momentum 0.9 lr 0.05 on the shards");
  // Uncompressed ASP: on the workers, and each push at lr / workers.
  s.mode = "asp";
  s.num_workers = 4;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->worker_momentum.enabled());
  EXPECT_EQ(o->training.optimizer().kind(), v1::OPTIMIZER_KIND_SGD);
  EXPECT_NEAR(o->training.optimizer().learning_rate(), 0.05 / 4, 1e-9);
  s.scale_async_lr = false;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_NEAR(o->training.optimizer().learning_rate(), 0.05, 1e-9);
  // Compressed, in any mode: on the worker, masked where a sparse push
  // sent.
  s.compressor = "dgc";
  s.scale_async_lr = true;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->worker_momentum.enabled());
  EXPECT_NEAR(o->training.optimizer().learning_rate(), 0.05 / 4, 1e-9);
  s.mode = "bsp";
  s.compressor = "topk";
  s.error_feedback = false;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->worker_momentum.masking);
  EXPECT_EQ(DescribeOptimizerPlacement(*o),
            "optimizer: momentum 0.9 on the worker before compression "
            "(masked where a sparse push sent); SGD lr 0.05 on the shards");
  // 1-bit sign with error feedback folds: SGD at lr / (1 - m); without
  // error feedback nothing would carry the history, so the worker keeps
  // the velocity.
  s.compressor = "onebit";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->worker_momentum.enabled());
  s.error_feedback = true;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->worker_momentum.enabled());
  EXPECT_FLOAT_EQ(o->folded_momentum, 0.9f);
  // 0.4 of momentum's long-run step lr / (1 - m) = 0.5, and a scale per
  // 512 elements.
  EXPECT_NEAR(o->training.optimizer().learning_rate(), 0.2, 1e-6);
  EXPECT_EQ(o->compressor.onebit_bucket, 512u);
  EXPECT_EQ(DescribeOptimizerPlacement(*o),
            "optimizer: momentum 0.9 folded into the step (0.4 of lr / (1 - "
            "momentum); error feedback carries the history); SGD lr 0.2 on "
            "the shards");
  // Folding can be asked for with any compressor, at any share of the step.
  s.compressor = "topk";
  s.momentum_placement = "fold";
  s.fold_scale = 1;
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->worker_momentum.enabled());
  EXPECT_EQ(DescribeOptimizerPlacement(*o),
            "optimizer: momentum 0.9 folded into the step (1 of lr / (1 - "
            "momentum); error feedback carries the history); SGD lr 0.5 on "
            "the shards");
  s.fold_scale = kDefaultFoldScale;
  // Each placement can be forced.
  s.error_feedback = true;
  s.momentum_placement = "server";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->training.optimizer().kind(), v1::OPTIMIZER_KIND_MOMENTUM);
  s.momentum_placement = "worker";
  s.optimizer = "nesterov";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->worker_momentum.nesterov);
  // Plain SGD has no momentum anywhere.
  s.momentum_placement = "auto";
  s.optimizer = "sgd";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->worker_momentum.enabled());
  EXPECT_NEAR(o->training.optimizer().learning_rate(), 0.05, 1e-9);
}

// Adam with compressed pushes and error feedback runs as 1-bit Adam: the
// first moment on the worker after dense warm-up steps, the second moment
// frozen on the shards after as many updates (one per push in ASP/SSP).
TEST(SyncSettingsTest, AdamWithCompressedPushesRunsAsOneBitAdam) {
  SyncSettings s;
  s.optimizer = "adam";
  s.lr = 0.001;
  s.adam_freeze_step = 50;
  absl::StatusOr<SyncOptions> o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->training.optimizer().kind(), v1::OPTIMIZER_KIND_ADAM);
  EXPECT_EQ(o->training.optimizer().freeze_variance_after(), 50u);
  EXPECT_FLOAT_EQ(o->worker_momentum.momentum, 0.9f);
  EXPECT_EQ(o->worker_momentum.dense_steps, 50u);
  EXPECT_TRUE(o->worker_momentum.masking);
  EXPECT_EQ(DescribeOptimizerPlacement(*o),
            "optimizer: 1-bit Adam: dense fp32 pushes for 50 steps, then the "
            "first moment (beta1 0.9) on the worker before compression "
            "(masked where a sparse push sent); adam lr 0.001 on the shards, "
            "its second moment frozen after update 50");
  s.mode = "asp";
  s.num_workers = 4;
  s.optimizer = "adamw";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->training.optimizer().kind(), v1::OPTIMIZER_KIND_ADAMW);
  EXPECT_EQ(o->training.optimizer().freeze_variance_after(), 200u);
  EXPECT_EQ(o->worker_momentum.dense_steps, 50u);
  // Adam stays on the shards where pushes are not compressed, without
  // error feedback, or when asked.
  for (const auto& [compressor, feedback, placement] :
       {std::tuple<std::string, bool, std::string>{"fp16", true, "auto"},
        {"topk", false, "auto"},
        {"onebit", true, "server"}}) {
    SCOPED_TRACE(compressor + " " + placement);
    s.compressor = compressor;
    s.error_feedback = feedback;
    s.momentum_placement = placement;
    o = SyncOptionsFromSettings(s);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_FALSE(o->worker_momentum.enabled());
    EXPECT_EQ(o->training.optimizer().freeze_variance_after(), 0u);
  }
  // Uncompressed pushes may ask for it.
  s.compressor = "none";
  s.error_feedback = true;
  s.momentum_placement = "worker";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->worker_momentum.dense_steps, 50u);
}

// A dense warm-up without momentum on the worker (Python's
// exchange="preconditioned", whose own Adam freezes its second moment):
// the pushes of the first steps are dense fp32; with 1-bit Adam the longer
// of the two warm-ups holds.
TEST(SyncSettingsTest, DenseStepsWarmUpWithOrWithoutMomentum) {
  SyncSettings s;
  s.optimizer = "sgd";
  s.momentum = 0;
  s.dense_steps = 7;
  absl::StatusOr<SyncOptions> o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->worker_momentum.enabled());
  EXPECT_EQ(o->worker_momentum.dense_steps, 7u);
  // SGD's momentum on the worker would send the dense steps' gradients
  // again through its velocity; on the shards or folded it does not.
  s.optimizer = "momentum";
  s.momentum = 0.9;
  s.compressor = "topk";
  EXPECT_THAT(std::string(SyncOptionsFromSettings(s).status().message()),
              ::testing::StartsWith("--dense-steps: 7 dense steps beside the "
                                    "momentum on the worker"));
  for (const char* placement : {"server", "fold"}) {
    s.momentum_placement = placement;
    o = SyncOptionsFromSettings(s);
    ASSERT_TRUE(o.ok()) << placement << ": " << o.status();
    EXPECT_EQ(o->worker_momentum.dense_steps, 7u);
  }
  s.momentum_placement = "auto";
  s.optimizer = "adam";
  s.momentum = 0.9;
  s.adam_freeze_step = 50;
  for (const auto& [dense, expected] :
       {std::pair<int64_t, uint64_t>{7, 50}, {80, 80}}) {
    s.dense_steps = dense;
    o = SyncOptionsFromSettings(s);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->worker_momentum.dense_steps, expected);
  }
}

TEST(SyncSettingsTest, NonFiniteGradientsAreRefusedOrZeroed) {
  SyncSettings s;
  absl::StatusOr<SyncOptions> o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->compressor.non_finite, NonFinitePolicy::kReject);
  s.non_finite = "zero";
  o = SyncOptionsFromSettings(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->compressor.non_finite, NonFinitePolicy::kZero);
}

TEST(SyncSettingsTest, BadPlacementsNameTheirSetting) {
  SyncSettings s;
  s.momentum_placement = "gpu";
  EXPECT_EQ(SyncOptionsFromSettings(s).status().message(),
            "--momentum-placement: 'gpu' is not auto, fold, worker or server");
  s.momentum_placement = "worker";
  s.optimizer = "sgd";
  EXPECT_THAT(std::string(SyncOptionsFromSettings(s).status().message()),
              ::testing::StartsWith("--momentum-placement: 'worker' applies"));
  s.momentum_placement = "fold";
  s.optimizer = "adam";
  EXPECT_EQ(SyncOptionsFromSettings(s).status().message(),
            "--momentum-placement: 'fold' is not auto, worker or server for "
            "--optimizer=adam");
  s.momentum_placement = "worker";
  s.adam_freeze_step = 0;
  EXPECT_THAT(std::string(SyncOptionsFromSettings(s).status().message()),
              ::testing::StartsWith("--adam-freeze-step: 0 must be >= 1"));
  s.adam_freeze_step = 10;
  s.compressor = "dgc";
  s.dgc_momentum = 0.9;
  EXPECT_THAT(std::string(SyncOptionsFromSettings(s).status().message()),
              ::testing::StartsWith("--dgc-momentum: adam's first moment"));
  s = SyncSettings();
  s.compressor = "dgc";
  s.dgc_momentum = 0.9;
  EXPECT_THAT(std::string(SyncOptionsFromSettings(s).status().message()),
              ::testing::StartsWith("--dgc-momentum: "));
}

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
      {"min_kept", [](SyncSettings* s) { s->min_kept = 0; }},
      {"threshold", [](SyncSettings* s) { s->threshold = -1; }},
      {"connect_timeout_seconds",
       [](SyncSettings* s) { s->connect_timeout_seconds = 0; }},
      {"levels", [](SyncSettings* s) { s->levels = 0; }},
      {"qsgd_bucket", [](SyncSettings* s) { s->qsgd_bucket = 100; }},
      {"qsgd_bucket", [](SyncSettings* s) { s->qsgd_bucket = -64; }},
      {"onebit_bucket", [](SyncSettings* s) { s->onebit_bucket = 32; }},
      {"dense_steps", [](SyncSettings* s) { s->dense_steps = -1; }},
      {"non_finite", [](SyncSettings* s) { s->non_finite = "skip"; }},
      {"fold_scale", [](SyncSettings* s) { s->fold_scale = 0; }},
      {"fold_scale", [](SyncSettings* s) { s->fold_scale = 1.5; }},
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
      {"pull_ratio", [](SyncSettings* s) { s->pull_ratio = -0.5; }},
      {"pull_value_type", [](SyncSettings* s) { s->pull_value_type = "fp8"; }},
      {"partition_bytes", [](SyncSettings* s) { s->partition_bytes = 6; }},
      {"compress_threads", [](SyncSettings* s) { s->compress_threads = -1; }},
      {"compress_threads", [](SyncSettings* s) { s->compress_threads = 2000; }},
      {"push_bucket_bytes", [](SyncSettings* s) { s->push_bucket_bytes = -1; }},
      {"push_bucket_bytes",
       [](SyncSettings* s) { s->push_bucket_bytes = (int64_t{1} << 40) + 1; }},
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
