#include "server/shard/optimizer.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "common/vector_clones.h"

namespace gradwire {
namespace {

using Kind = OptimizerSettings::Kind;
using Schedule = OptimizerSettings::Schedule;

constexpr double kPi = 3.14159265358979323846;

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

// Learning rate after warm-up, `u` updates into the schedule.
double ScheduledLearningRate(const OptimizerSettings& s, uint64_t u) {
  switch (s.schedule) {
    case Schedule::kConstant:
      break;
    case Schedule::kStep:
      return s.learning_rate *
             std::pow(s.gamma, static_cast<double>(u / s.step_size));
    case Schedule::kCosine: {
      const double progress =
          static_cast<double>(std::min(u, s.total_updates)) /
          static_cast<double>(s.total_updates);
      return s.min_learning_rate + 0.5 *
                                       (s.learning_rate - s.min_learning_rate) *
                                       (1.0 + std::cos(kPi * progress));
    }
  }
  return s.learning_rate;
}

// torch.lerp's float kernel: the formula is chosen by the weight so that the
// rounding error stays small at both ends.
inline float Lerp(float self, float end, float weight) {
  return weight < 0.5f ? self + weight * (end - self)
                       : end - (end - self) * (1.0f - weight);
}

// Sizes a state buffer on first use; a non-empty buffer must already fit.
void EnsureSized(std::vector<float>* buffer, size_t numel) {
  assert(buffer->empty() || buffer->size() == numel);
  if (buffer->empty()) buffer->assign(numel, 0.0f);
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

double LearningRateAt(const OptimizerSettings& settings, uint64_t update) {
  if (update < settings.warmup_updates) {
    return settings.learning_rate * static_cast<double>(update + 1) /
           static_cast<double>(settings.warmup_updates);
  }
  return ScheduledLearningRate(settings, update - settings.warmup_updates);
}

Optimizer::Optimizer(OptimizerSettings settings)
    : settings_(std::move(settings)) {}

void Optimizer::Apply(absl::Span<float> weights,
                      absl::Span<const float> gradient,
                      OptimizerState* state) const {
  assert(state != nullptr);
  assert(weights.size() == gradient.size());
  const double lr = LearningRateAt(settings_, state->updates);
  switch (settings_.kind) {
    case Kind::kSgd:
      ApplySgd(lr, weights, gradient);
      break;
    case Kind::kMomentum:
      ApplyMomentum(lr, weights, gradient, state);
      break;
    case Kind::kAdam:
    case Kind::kAdamW:
      ApplyAdam(lr, weights, gradient, state);
      break;
  }
  ++state->updates;
}

bool Optimizer::UpdatesOnlySelected(uint64_t update) const {
  const bool plain_sgd =
      settings_.kind == Kind::kSgd ||
      (settings_.kind == Kind::kMomentum && settings_.momentum == 0.0);
  return (plain_sgd || VarianceFrozenAt(update)) &&
         settings_.weight_decay == 0.0;
}

void Optimizer::FinishSelectedUpdate(OptimizerState* state) const {
  if (VarianceFrozenAt(state->updates)) {
    std::vector<float>().swap(state->first_moment);
  }
  ++state->updates;
}

bool Optimizer::VarianceFrozenAt(uint64_t update) const {
  return IsAdam(settings_.kind) && settings_.freeze_variance_after > 0 &&
         update >= settings_.freeze_variance_after;
}

float Optimizer::FrozenBiasCorrectionSqrt() const {
  // The second moment was last updated at t = F.
  const double frozen_t = static_cast<double>(settings_.freeze_variance_after);
  return static_cast<float>(
      std::sqrt(1.0 - std::pow(settings_.beta2, frozen_t)));
}

void Optimizer::ApplyAt(absl::Span<const float> weights,
                        const OptimizerState& state,
                        absl::Span<const uint32_t> indices,
                        absl::Span<const float> values, uint64_t update,
                        absl::Span<float> out) const {
  assert(UpdatesOnlySelected(update));
  assert(indices.size() == values.size() && values.size() == out.size());
  const float neg_lr = static_cast<float>(-LearningRateAt(settings_, update));
  // The reads miss the cache about once per element (sorted, sparse
  // indices): fetch ahead.
  constexpr size_t kPrefetchAhead = 16;
  if (VarianceFrozenAt(update)) {
    // ApplyFrozenAdam's expression without weight decay.
    assert(state.second_moment.size() == weights.size());
    const float* v = state.second_moment.data();
    const float bc2_sqrt = FrozenBiasCorrectionSqrt();
    const float one_minus_beta1 = static_cast<float>(1.0 - settings_.momentum);
    const float eps = static_cast<float>(settings_.epsilon);
    for (size_t j = 0; j < indices.size(); ++j) {
      if (j + kPrefetchAhead < indices.size()) {
        __builtin_prefetch(&weights[indices[j + kPrefetchAhead]]);
        __builtin_prefetch(&v[indices[j + kPrefetchAhead]]);
      }
      const float m = one_minus_beta1 * values[j];
      const float denom = std::sqrt(v[indices[j]]) / bc2_sqrt + eps;
      out[j] = weights[indices[j]] + neg_lr * m / denom;
    }
    return;
  }
  const float wd = static_cast<float>(settings_.weight_decay);
  // ApplySgd's expression, element by element.
  for (size_t j = 0; j < indices.size(); ++j) {
    if (j + kPrefetchAhead < indices.size()) {
      __builtin_prefetch(&weights[indices[j + kPrefetchAhead]]);
    }
    const float w = weights[indices[j]];
    const float g = values[j] + wd * w;
    out[j] = w + neg_lr * g;
  }
}

// The loops below follow torch.optim's single-tensor code path operation by
// operation, with scalars cast to float where PyTorch's float kernels do, so
// the results agree with PyTorch to float rounding.

namespace {

using SgdStep = Optimizer::SgdStep;

// The loops of plain SGD over a whole chunk, in wide vectors where the CPU
// has them (common/vector_clones.h): element-wise, so every clone gives the
// same bits.

// w[i] = step.Next(w[i], g[i]).
GRADWIRE_VECTOR_CLONES void SgdLoop(SgdStep step, float* w, const float* g,
                                    size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] = step.Next(w[i], g[i]);
}

// The magnitude field of `value` (every bit but the sign): for floats the
// integer order of these fields is the order of |value|, so the largest
// is found with integer max, which vectorises where a float max (with its
// NaN rules) does not.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t MagnitudeBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits & 0x7fffffffu;
}

float MagnitudeFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// w[i] = step.Next(w[i], g[i]), returning the largest MagnitudeBits of the
// new weights.
GRADWIRE_VECTOR_CLONES uint32_t SgdBoundedLoop(SgdStep step, float* w,
                                               const float* g, size_t n) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const float next = step.Next(w[i], g[i]);
    w[i] = next;
    largest = std::max(largest, MagnitudeBits(next));
  }
  return largest;
}

// The same, zeroing g.
GRADWIRE_VECTOR_CLONES uint32_t SgdAndClearLoop(SgdStep step, float* w,
                                                float* g, size_t n) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const float next = step.Next(w[i], g[i]);
    w[i] = next;
    g[i] = 0.0f;
    largest = std::max(largest, MagnitudeBits(next));
  }
  return largest;
}

// Whether step.Next(weights[i], gradient(i)) is finite for every i. Exponent
// bits all ones: inf or NaN. An OR over a block, not a branch per element,
// so that the loop vectorises; a block at a time, so that an overflow stops
// the scan.
// Inlined into each vector clone that calls it, so that each is built for
// its width.
template <typename Gradient>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool AllNextFinite(const SgdStep& step,
                                                       const float* w, size_t n,
                                                       Gradient gradient) {
  constexpr uint32_t kExponent = 0x7f800000u;
  constexpr size_t kBlock = 4096;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t non_finite = 0;
    for (size_t i = begin; i < end; ++i) {
      const float next = step.Next(w[i], gradient(i));
      uint32_t bits;
      std::memcpy(&bits, &next, sizeof(bits));
      non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
    if (non_finite != 0) return false;
  }
  return true;
}

GRADWIRE_VECTOR_CLONES bool SgdFinite(SgdStep step, const float* w,
                                      const float* g, size_t n) {
  return AllNextFinite(step, w, n, [g](size_t i) { return g[i]; });
}

// With the gradient sum[i] + share * addend[i] (sum[i] + addend[i] at a
// share of 1, as AccumulateInto adds it).
GRADWIRE_VECTOR_CLONES bool SgdWithAddendFinite(SgdStep step, const float* w,
                                                const float* sum,
                                                const float* addend,
                                                float share, size_t n) {
  if (share == 1.0f) {
    return AllNextFinite(
        step, w, n, [sum, addend](size_t i) { return sum[i] + addend[i]; });
  }
  return AllNextFinite(step, w, n, [sum, addend, share](size_t i) {
    return sum[i] + share * addend[i];
  });
}

}  // namespace

void Optimizer::ApplySgd(double lr, absl::Span<float> weights,
                         absl::Span<const float> gradient) const {
  const SgdStep step{static_cast<float>(-lr),
                     static_cast<float>(settings_.weight_decay)};
  SgdLoop(step, weights.data(), gradient.data(), weights.size());
}

bool Optimizer::SgdStep::FiniteWithin(float weight_bound,
                                      float gradient_bound) const {
  // In exact arithmetic |Next(w, g)| and each of its intermediates are at
  // most B = W + |lr| * (G + wd * W). Each of Next's four float operations
  // rounds by a relative 2^-24 at most, so no float intermediate exceeds
  // 2 * B; B below 2^126 keeps that far under float's largest value (just
  // under 2^128), where an operation would overflow. (NaN needs an
  // infinity first: finite operands give none.)
  const double w = weight_bound;
  const double g = gradient_bound;
  if (!(w >= 0.0 && g >= 0.0)) return false;  // A NaN bound.
  const double bound =
      w + std::fabs(static_cast<double>(neg_lr)) *
              (g + std::fabs(static_cast<double>(weight_decay)) * w);
  return bound < 0x1p126;  // False for an infinite bound.
}

bool Optimizer::KeepsNoElementState() const {
  return settings_.kind == Kind::kSgd ||
         (settings_.kind == Kind::kMomentum && settings_.momentum == 0.0);
}

Optimizer::SgdStep Optimizer::SgdStepAt(uint64_t update) const {
  assert(KeepsNoElementState());
  return SgdStep{static_cast<float>(-LearningRateAt(settings_, update)),
                 static_cast<float>(settings_.weight_decay)};
}

bool Optimizer::SgdUpdateFinite(absl::Span<const float> weights,
                                absl::Span<const float> gradient,
                                uint64_t update) const {
  assert(weights.size() == gradient.size());
  return SgdFinite(SgdStepAt(update), weights.data(), gradient.data(),
                   weights.size());
}

bool Optimizer::SgdUpdateFinite(absl::Span<const float> weights,
                                absl::Span<const float> sum,
                                absl::Span<const float> addend, float share,
                                uint64_t update) const {
  assert(weights.size() == sum.size() && sum.size() == addend.size());
  return SgdWithAddendFinite(SgdStepAt(update), weights.data(), sum.data(),
                             addend.data(), share, weights.size());
}

float Optimizer::ApplySgdBounded(absl::Span<float> weights,
                                 absl::Span<const float> gradient,
                                 OptimizerState* state) const {
  assert(weights.size() == gradient.size());
  const uint32_t largest =
      SgdBoundedLoop(SgdStepAt(state->updates), weights.data(), gradient.data(),
                     weights.size());
  ++state->updates;
  return MagnitudeFromBits(largest);
}

float Optimizer::ApplySgdAndClear(absl::Span<float> weights,
                                  absl::Span<float> gradient,
                                  OptimizerState* state) const {
  assert(weights.size() == gradient.size());
  const uint32_t largest =
      SgdAndClearLoop(SgdStepAt(state->updates), weights.data(),
                      gradient.data(), weights.size());
  ++state->updates;
  return MagnitudeFromBits(largest);
}

float Optimizer::ApplySgdAtAndClear(absl::Span<float> weights,
                                    absl::Span<float> gradient,
                                    absl::Span<const uint32_t> positions,
                                    OptimizerState* state) const {
  assert(weights.size() == gradient.size());
  assert(UpdatesOnlySelected(state->updates));
  const SgdStep step = SgdStepAt(state->updates);
  uint32_t largest = 0;
  for (const uint32_t i : positions) {
    const float next = step.Next(weights[i], gradient[i]);
    weights[i] = next;
    gradient[i] = 0.0f;
    largest = std::max(largest, MagnitudeBits(next));
  }
  ++state->updates;
  return MagnitudeFromBits(largest);
}

void Optimizer::ApplyMomentum(double lr, absl::Span<float> weights,
                              absl::Span<const float> gradient,
                              OptimizerState* state) const {
  // torch.optim.SGD keeps no buffer at momentum 0; the rule is then plain SGD.
  if (settings_.momentum == 0.0) return ApplySgd(lr, weights, gradient);
  const float wd = static_cast<float>(settings_.weight_decay);
  const float momentum = static_cast<float>(settings_.momentum);
  const float neg_lr = static_cast<float>(-lr);
  const bool nesterov = settings_.nesterov;
  // PyTorch starts the buffer as a copy of the first gradient; with dampening
  // 0, starting it at zero and applying the usual rule gives exactly that.
  EnsureSized(&state->first_moment, weights.size());
  float* buf = state->first_moment.data();
  for (size_t i = 0; i < weights.size(); ++i) {
    const float g = gradient[i] + wd * weights[i];
    buf[i] = buf[i] * momentum + g;
    const float step = nesterov ? g + momentum * buf[i] : buf[i];
    weights[i] += neg_lr * step;
  }
}

void Optimizer::ApplyAdam(double lr, absl::Span<float> weights,
                          absl::Span<const float> gradient,
                          OptimizerState* state) const {
  if (VarianceFrozenAt(state->updates)) {
    return ApplyFrozenAdam(lr, weights, gradient, state);
  }
  const double beta1 = settings_.momentum;
  const double beta2 = settings_.beta2;
  const double t = static_cast<double>(state->updates + 1);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  // AdamW decays the weights before the step; Adam folds the decay into g.
  const bool decoupled = settings_.kind == Kind::kAdamW;
  const float decay = static_cast<float>(1.0 - lr * settings_.weight_decay);
  const float wd =
      decoupled ? 0.0f : static_cast<float>(settings_.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const float b2 = static_cast<float>(beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(settings_.epsilon);
  const float neg_step_size = static_cast<float>(-lr / bias_correction1);
  EnsureSized(&state->first_moment, weights.size());
  EnsureSized(&state->second_moment, weights.size());
  float* m = state->first_moment.data();
  float* v = state->second_moment.data();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (decoupled) weights[i] *= decay;
    const float g = gradient[i] + wd * weights[i];
    m[i] = Lerp(m[i], g, one_minus_beta1);
    v[i] = v[i] * b2 + one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    weights[i] += neg_step_size * m[i] / denom;
  }
}

void Optimizer::ApplyFrozenAdam(double lr, absl::Span<float> weights,
                                absl::Span<const float> velocity,
                                OptimizerState* state) const {
  const float bc2_sqrt = FrozenBiasCorrectionSqrt();
  const bool decoupled = settings_.kind == Kind::kAdamW;
  const float decay = static_cast<float>(1.0 - lr * settings_.weight_decay);
  const float wd =
      decoupled ? 0.0f : static_cast<float>(settings_.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - settings_.momentum);
  const float eps = static_cast<float>(settings_.epsilon);
  const float neg_lr = static_cast<float>(-lr);
  // The workers keep the first moment from here on.
  std::vector<float>().swap(state->first_moment);
  assert(state->second_moment.size() == weights.size());
  const float* v = state->second_moment.data();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (decoupled) weights[i] *= decay;
    const float m = one_minus_beta1 * velocity[i] + wd * weights[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    weights[i] += neg_lr * m / denom;
  }
}

}  // namespace gradwire
