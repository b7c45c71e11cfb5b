#include "server/shard/optimizer_settings.h"

#include <functional>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using Kind = OptimizerSettings::Kind;
using Schedule = OptimizerSettings::Schedule;

v1::OptimizerConfig ValidAdamConfig() {
  v1::OptimizerConfig c;
  c.set_kind(v1::OPTIMIZER_KIND_ADAM);
  c.set_learning_rate(0.5f);
  c.set_momentum(0.875f);
  c.set_beta2(0.99f);
  c.set_epsilon(1e-8f);
  c.set_weight_decay(0.25f);
  return c;
}

TEST(OptimizerProtoTest, UnspecifiedMeansSgdWithConstantRate) {
  v1::OptimizerConfig c;
  c.set_learning_rate(0.5f);
  absl::StatusOr<OptimizerSettings> s = OptimizerSettingsFromProto(c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, Kind::kSgd);
  EXPECT_EQ(s->schedule, Schedule::kConstant);
  EXPECT_EQ(s->learning_rate, 0.5);
  EXPECT_EQ(s->epsilon, 0.0);  // Unused by SGD, so 0 is accepted.
}

TEST(OptimizerProtoTest, RoundTrip) {
  OptimizerSettings s;
  s.kind = Kind::kMomentum;
  s.learning_rate = 0.5;
  s.momentum = 0.75;
  s.nesterov = true;
  s.beta2 = 0.5;
  s.epsilon = 0.125;
  s.weight_decay = 0.0625;
  s.schedule = Schedule::kCosine;
  s.warmup_updates = 11;
  s.step_size = 12;
  s.gamma = 0.25;
  s.total_updates = 13;
  s.min_learning_rate = 0.03125;
  const v1::OptimizerConfig proto = ToProto(s);
  EXPECT_EQ(proto.kind(), v1::OPTIMIZER_KIND_MOMENTUM);
  EXPECT_EQ(proto.schedule(), v1::LR_SCHEDULE_KIND_COSINE);
  absl::StatusOr<OptimizerSettings> back = OptimizerSettingsFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, s.kind);
  EXPECT_EQ(back->learning_rate, s.learning_rate);
  EXPECT_EQ(back->momentum, s.momentum);
  EXPECT_EQ(back->nesterov, s.nesterov);
  EXPECT_EQ(back->beta2, s.beta2);
  EXPECT_EQ(back->epsilon, s.epsilon);
  EXPECT_EQ(back->weight_decay, s.weight_decay);
  EXPECT_EQ(back->schedule, s.schedule);
  EXPECT_EQ(back->warmup_updates, s.warmup_updates);
  EXPECT_EQ(back->step_size, s.step_size);
  EXPECT_EQ(back->gamma, s.gamma);
  EXPECT_EQ(back->total_updates, s.total_updates);
  EXPECT_EQ(back->min_learning_rate, s.min_learning_rate);
  s.kind = Kind::kAdam;
  s.nesterov = false;
  s.freeze_variance_after = 17;
  back = OptimizerSettingsFromProto(ToProto(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->freeze_variance_after, 17u);
}

TEST(OptimizerProtoTest, DefaultsAreValidForEveryKindAndSchedule) {
  for (Kind kind : {Kind::kSgd, Kind::kMomentum, Kind::kAdam, Kind::kAdamW}) {
    for (Schedule schedule :
         {Schedule::kConstant, Schedule::kStep, Schedule::kCosine}) {
      OptimizerSettings s;
      s.kind = kind;
      s.schedule = schedule;
      EXPECT_TRUE(ValidateOptimizerSettings(s).ok());
      EXPECT_TRUE(OptimizerSettingsFromProto(ToProto(s)).ok());
    }
  }
}

struct BadField {
  std::string name;  // Also the text the error must contain.
  std::function<void(v1::OptimizerConfig*)> mutate;
};

class OptimizerValidationTest : public ::testing::TestWithParam<BadField> {};

TEST_P(OptimizerValidationTest, NamesTheField) {
  v1::OptimizerConfig c = ValidAdamConfig();
  ASSERT_TRUE(OptimizerSettingsFromProto(c).ok());
  GetParam().mutate(&c);
  absl::StatusOr<OptimizerSettings> s = OptimizerSettingsFromProto(c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr(GetParam().name));
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    EveryField, OptimizerValidationTest,
    ::testing::Values(
        BadField{
            "kind 7",
            [](auto* c) { c->set_kind(static_cast<v1::OptimizerKind>(7)); }},
        BadField{"learning_rate 0", [](auto* c) { c->set_learning_rate(0); }},
        BadField{"learning_rate -1", [](auto* c) { c->set_learning_rate(-1); }},
        BadField{"learning_rate nan",
                 [](auto* c) { c->set_learning_rate(kNaN); }},
        BadField{"learning_rate inf",
                 [](auto* c) { c->set_learning_rate(kInf); }},
        BadField{"momentum 1", [](auto* c) { c->set_momentum(1); }},
        BadField{"momentum -0.5", [](auto* c) { c->set_momentum(-0.5f); }},
        BadField{"beta2 1", [](auto* c) { c->set_beta2(1); }},
        BadField{"beta2 nan", [](auto* c) { c->set_beta2(kNaN); }},
        BadField{"epsilon 0", [](auto* c) { c->set_epsilon(0); }},
        BadField{"epsilon -1", [](auto* c) { c->set_epsilon(-1); }},
        BadField{"weight_decay -0.5",
                 [](auto* c) { c->set_weight_decay(-0.5f); }},
        BadField{"weight_decay inf",
                 [](auto* c) { c->set_weight_decay(kInf); }},
        BadField{"nesterov",
                 [](auto* c) { c->set_nesterov(true); }},  // kind is ADAM
        BadField{"nesterov",
                 [](auto* c) {
                   c->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
                   c->set_momentum(0);
                   c->set_nesterov(true);
                 }},
        BadField{"freeze_variance_after 5 applies to ADAM and ADAMW only",
                 [](auto* c) {
                   c->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
                   c->set_freeze_variance_after(5);
                 }},
        BadField{"schedule 9",
                 [](auto* c) {
                   c->set_schedule(static_cast<v1::LrScheduleKind>(9));
                 }},
        BadField{"step_size 0",
                 [](auto* c) {
                   c->set_schedule(v1::LR_SCHEDULE_KIND_STEP);
                   c->set_gamma(0.5f);
                 }},
        BadField{"gamma 0",
                 [](auto* c) {
                   c->set_schedule(v1::LR_SCHEDULE_KIND_STEP);
                   c->set_step_size(10);
                 }},
        BadField{"gamma 1.5",
                 [](auto* c) {
                   c->set_schedule(v1::LR_SCHEDULE_KIND_STEP);
                   c->set_step_size(10);
                   c->set_gamma(1.5f);
                 }},
        BadField{"total_updates 0",
                 [](auto* c) { c->set_schedule(v1::LR_SCHEDULE_KIND_COSINE); }},
        BadField{"min_learning_rate -0.25",
                 [](auto* c) {
                   c->set_schedule(v1::LR_SCHEDULE_KIND_COSINE);
                   c->set_total_updates(100);
                   c->set_min_learning_rate(-0.25f);
                 }},
        BadField{"min_learning_rate 0.75", [](auto* c) {
                   c->set_schedule(v1::LR_SCHEDULE_KIND_COSINE);
                   c->set_total_updates(100);
                   c->set_min_learning_rate(0.75f);
                 }}));

TEST(OptimizerProtoTest, EpsilonZeroIsFineForSgd) {
  v1::OptimizerConfig c = ValidAdamConfig();
  c.set_kind(v1::OPTIMIZER_KIND_SGD);
  c.set_epsilon(0);
  EXPECT_TRUE(OptimizerSettingsFromProto(c).ok());
}

}  // namespace
}  // namespace gradwire
