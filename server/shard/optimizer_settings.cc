#include "server/shard/optimizer_settings.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace {

using Kind = OptimizerSettings::Kind;
using Schedule = OptimizerSettings::Schedule;

absl::Status Invalid(absl::string_view field, double value,
                     absl::string_view requirement) {
  return absl::InvalidArgumentError(
      absl::StrFormat("optimizer %s %g %s", field, value, requirement));
}

bool IsAdam(Kind kind) { return kind == Kind::kAdam || kind == Kind::kAdamW; }

// A range of the form [0, 1); `!(a && b)` also rejects NaN.
bool InUnitInterval(double x) { return x >= 0.0 && x < 1.0; }

absl::Status ValidateKindFields(const OptimizerSettings& s) {
  if (!(std::isfinite(s.learning_rate) && s.learning_rate > 0.0)) {
    return Invalid("learning_rate", s.learning_rate, "must be finite and > 0");
  }
  if (!InUnitInterval(s.momentum)) {
    return Invalid("momentum", s.momentum, "is outside [0, 1)");
  }
  if (!InUnitInterval(s.beta2)) {
    return Invalid("beta2", s.beta2, "is outside [0, 1)");
  }
  if (!(std::isfinite(s.weight_decay) && s.weight_decay >= 0.0)) {
    return Invalid("weight_decay", s.weight_decay, "must be finite and >= 0");
  }
  // epsilon's proto default (0) is invalid, so SGD configs may leave it unset.
  if (IsAdam(s.kind) && !(std::isfinite(s.epsilon) && s.epsilon > 0.0)) {
    return Invalid("epsilon", s.epsilon, "must be finite and > 0");
  }
  if (s.freeze_variance_after > 0 && !IsAdam(s.kind)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "optimizer freeze_variance_after %d applies to ADAM and ADAMW only",
        s.freeze_variance_after));
  }
  if (s.kind == Kind::kMean && s.weight_decay != 0.0) {
    return Invalid("weight_decay", s.weight_decay,
                   "must be 0 for kind MEAN (the shards only average)");
  }
  // Same rule as torch.optim.SGD: Nesterov needs a non-zero momentum.
  if (s.nesterov && !(s.kind == Kind::kMomentum && s.momentum > 0.0)) {
    return absl::InvalidArgumentError(
        "optimizer nesterov requires kind MOMENTUM with momentum > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateScheduleFields(const OptimizerSettings& s) {
  if (s.schedule == Schedule::kStep) {
    if (s.step_size < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "optimizer step_size %d must be >= 1 for the STEP schedule",
          s.step_size));
    }
    if (!(s.gamma > 0.0 && s.gamma <= 1.0)) {
      return Invalid("gamma", s.gamma, "is outside (0, 1]");
    }
  }
  if (s.schedule == Schedule::kCosine) {
    if (s.total_updates < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "optimizer total_updates %d must be >= 1 for the COSINE schedule",
          s.total_updates));
    }
    if (!(s.min_learning_rate >= 0.0 &&
          s.min_learning_rate <= s.learning_rate)) {
      return Invalid(
          "min_learning_rate", s.min_learning_rate,
          absl::StrFormat("is outside [0, learning_rate %g]", s.learning_rate));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Kind> KindFromProto(v1::OptimizerKind kind) {
  switch (kind) {
    case v1::OPTIMIZER_KIND_UNSPECIFIED:
    case v1::OPTIMIZER_KIND_SGD:
      return Kind::kSgd;
    case v1::OPTIMIZER_KIND_MOMENTUM:
      return Kind::kMomentum;
    case v1::OPTIMIZER_KIND_ADAM:
      return Kind::kAdam;
    case v1::OPTIMIZER_KIND_ADAMW:
      return Kind::kAdamW;
    case v1::OPTIMIZER_KIND_MEAN:
      return Kind::kMean;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("optimizer kind %d is unknown", static_cast<int>(kind)));
}

absl::StatusOr<Schedule> ScheduleFromProto(v1::LrScheduleKind schedule) {
  switch (schedule) {
    case v1::LR_SCHEDULE_KIND_UNSPECIFIED:
    case v1::LR_SCHEDULE_KIND_CONSTANT:
      return Schedule::kConstant;
    case v1::LR_SCHEDULE_KIND_STEP:
      return Schedule::kStep;
    case v1::LR_SCHEDULE_KIND_COSINE:
      return Schedule::kCosine;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "optimizer schedule %d is unknown", static_cast<int>(schedule)));
}

v1::OptimizerKind KindToProto(Kind kind) {
  switch (kind) {
    case Kind::kSgd:
      return v1::OPTIMIZER_KIND_SGD;
    case Kind::kMomentum:
      return v1::OPTIMIZER_KIND_MOMENTUM;
    case Kind::kAdam:
      return v1::OPTIMIZER_KIND_ADAM;
    case Kind::kAdamW:
      return v1::OPTIMIZER_KIND_ADAMW;
    case Kind::kMean:
      return v1::OPTIMIZER_KIND_MEAN;
  }
  return v1::OPTIMIZER_KIND_UNSPECIFIED;
}

v1::LrScheduleKind ScheduleToProto(Schedule schedule) {
  switch (schedule) {
    case Schedule::kConstant:
      return v1::LR_SCHEDULE_KIND_CONSTANT;
    case Schedule::kStep:
      return v1::LR_SCHEDULE_KIND_STEP;
    case Schedule::kCosine:
      return v1::LR_SCHEDULE_KIND_COSINE;
  }
  return v1::LR_SCHEDULE_KIND_UNSPECIFIED;
}

}  // namespace

absl::Status ValidateOptimizerSettings(const OptimizerSettings& settings) {
  if (absl::Status s = ValidateKindFields(settings); !s.ok()) return s;
  return ValidateScheduleFields(settings);
}

absl::StatusOr<OptimizerSettings> OptimizerSettingsFromProto(
    const v1::OptimizerConfig& config) {
  OptimizerSettings s;
  absl::StatusOr<Kind> kind = KindFromProto(config.kind());
  if (!kind.ok()) return kind.status();
  absl::StatusOr<Schedule> schedule = ScheduleFromProto(config.schedule());
  if (!schedule.ok()) return schedule.status();
  s.kind = *kind;
  s.learning_rate = config.learning_rate();
  s.momentum = config.momentum();
  s.nesterov = config.nesterov();
  s.beta2 = config.beta2();
  s.epsilon = config.epsilon();
  s.weight_decay = config.weight_decay();
  s.schedule = *schedule;
  s.warmup_updates = config.warmup_updates();
  s.step_size = config.step_size();
  s.gamma = config.gamma();
  s.total_updates = config.total_updates();
  s.min_learning_rate = config.min_learning_rate();
  s.freeze_variance_after = config.freeze_variance_after();
  if (absl::Status status = ValidateOptimizerSettings(s); !status.ok()) {
    return status;
  }
  return s;
}

v1::OptimizerConfig ToProto(const OptimizerSettings& s) {
  v1::OptimizerConfig config;
  config.set_kind(KindToProto(s.kind));
  config.set_learning_rate(static_cast<float>(s.learning_rate));
  config.set_momentum(static_cast<float>(s.momentum));
  config.set_nesterov(s.nesterov);
  config.set_beta2(static_cast<float>(s.beta2));
  config.set_epsilon(static_cast<float>(s.epsilon));
  config.set_weight_decay(static_cast<float>(s.weight_decay));
  config.set_schedule(ScheduleToProto(s.schedule));
  config.set_warmup_updates(s.warmup_updates);
  config.set_step_size(s.step_size);
  config.set_gamma(static_cast<float>(s.gamma));
  config.set_total_updates(s.total_updates);
  config.set_min_learning_rate(static_cast<float>(s.min_learning_rate));
  config.set_freeze_variance_after(s.freeze_variance_after);
  return config;
}

}  // namespace gradwire
