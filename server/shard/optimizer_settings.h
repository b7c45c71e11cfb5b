// The configuration of a shard's optimizer: which update rule it runs, its
// hyper-parameters and its learning-rate schedule, as plain C++ and as the
// proto the shard receives at Init, with the ranges a valid configuration
// keeps. The rules themselves are in optimizer.h; the schedule in
// learning_rate.h.
#ifndef GRADWIRE_SERVER_SHARD_OPTIMIZER_SETTINGS_H_
#define GRADWIRE_SERVER_SHARD_OPTIMIZER_SETTINGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

// Plain C++ form of v1::OptimizerConfig. The defaults form a valid
// configuration: plain SGD at a constant learning rate of 0.01, with Adam's
// usual betas and epsilon ready for kind kAdam / kAdamW.
//
// Hyper-parameters are doubles, as PyTorch's are; the proto carries floats,
// so a round trip through ToProto narrows them to float.
struct OptimizerSettings {
  enum class Kind {
    // w -= lr * (g + wd * w).
    kSgd,
    // Heavy-ball momentum, or Nesterov momentum when `nesterov` is set.
    kMomentum,
    // Adam with L2 weight decay coupled into the gradient.
    kAdam,
    // Adam with weight decay decoupled from the gradient.
    kAdamW,
    // No optimizer: w = g, the step's mean (v1::OPTIMIZER_KIND_MEAN).
    // Without weight decay; the learning rate and schedule are not used.
    kMean,
  };
  enum class Schedule {
    // The base learning rate throughout.
    kConstant,
    // learning_rate * gamma^floor(u / step_size).
    kStep,
    // Cosine decay from learning_rate to min_learning_rate over
    // total_updates, then min_learning_rate.
    kCosine,
  };

  Kind kind = Kind::kSgd;
  // Base learning rate; finite and > 0.
  double learning_rate = 0.01;
  // Momentum factor for kMomentum; beta1 for kAdam / kAdamW; ignored by kSgd.
  // In [0, 1).
  double momentum = 0.9;
  // Nesterov momentum; only with kMomentum and momentum > 0.
  bool nesterov = false;
  // Adam's beta2, in [0, 1).
  double beta2 = 0.999;
  // Adam's epsilon; finite and > 0 (checked for kAdam / kAdamW only).
  double epsilon = 1e-8;
  // Weight decay; finite and >= 0. Coupled (L2, added to the gradient) for
  // kSgd, kMomentum and kAdam; decoupled for kAdamW; 0 for kMean.
  double weight_decay = 0.0;

  Schedule schedule = Schedule::kConstant;
  // Updates of linear warm-up before the schedule starts; 0 disables it.
  uint64_t warmup_updates = 0;
  // kStep: updates between decays (>= 1) and the decay factor, in (0, 1].
  uint64_t step_size = 30;
  double gamma = 0.1;
  // kCosine: length of the decay (>= 1) and the final learning rate, in
  // [0, learning_rate].
  uint64_t total_updates = 1000;
  double min_learning_rate = 0.0;

  // kAdam / kAdamW: after this many updates of a chunk (>= 1), its second
  // moment and bias correction freeze and each gradient is read as the
  // workers' velocity (1-bit Adam's compression stage; Optimizer::Apply
  // states the rule). 0: never. Other kinds: must be 0.
  uint64_t freeze_variance_after = 0;
};

// OK when every field is inside the range documented above; otherwise
// INVALID_ARGUMENT naming the first bad field and its value. Fields that the
// kind or schedule does not use are checked only where their proto default
// (0) is itself valid, so a config need not fill fields it does not use.
absl::Status ValidateOptimizerSettings(const OptimizerSettings& settings);

// Converts and validates. OPTIMIZER_KIND_UNSPECIFIED means SGD and
// LR_SCHEDULE_KIND_UNSPECIFIED means constant. Every other field is taken
// literally: proto3 cannot tell an unset field from 0, so, for example, an
// ADAM config must set beta2 and epsilon itself. Errors: INVALID_ARGUMENT for
// an unknown enum value or a value outside its range, naming the field.
absl::StatusOr<OptimizerSettings> OptimizerSettingsFromProto(
    const v1::OptimizerConfig& config);

// The proto form, with explicit (never UNSPECIFIED) enums. Doubles are
// narrowed to float.
v1::OptimizerConfig ToProto(const OptimizerSettings& settings);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_OPTIMIZER_SETTINGS_H_
