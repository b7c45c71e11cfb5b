// Adam (weight decay coupled into the gradient) and AdamW (decoupled), as
// torch.optim.Adam / AdamW run them with amsgrad=False, and their frozen
// form: 1-bit Adam's compression stage, where the second moment and its bias
// correction stop at update freeze_variance_after and each gradient is the
// workers' velocity.
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "server/shard/optimizer.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {
namespace {

// torch.lerp's float kernel: the formula is chosen by the weight so that the
// rounding error stays small at both ends.
inline float Lerp(float self, float end, float weight) {
  return weight < 0.5f ? self + weight * (end - self)
                       : end - (end - self) * (1.0f - weight);
}

class AdamRule final : public OptimizerRule {
 public:
  explicit AdamRule(const OptimizerSettings& settings)
      : settings_(settings),
        decoupled_(settings.kind == OptimizerSettings::Kind::kAdamW) {}

  void Apply(double lr, absl::Span<float> weights,
             absl::Span<const float> gradient,
             OptimizerState* state) const override;

  // Past the freeze the state no longer changes, and a zero velocity leaves
  // a weight where it is, unless weight decay shrinks it.
  bool UpdatesOnlySelected(uint64_t update) const override {
    return VarianceFrozenAt(update) && settings_.weight_decay == 0.0;
  }

  bool ApplyAt(float neg_lr, absl::Span<const float> weights,
               const OptimizerState& state, absl::Span<const uint32_t> indices,
               absl::Span<const float> values, uint64_t update,
               absl::Span<float> out) const override;

  void FinishSelectedUpdate(OptimizerState* state) const override {
    if (VarianceFrozenAt(state->updates)) ReleaseFirstMoment(state);
  }

 private:
  // Whether update number `update` is past the freeze.
  bool VarianceFrozenAt(uint64_t update) const {
    return settings_.freeze_variance_after > 0 &&
           update >= settings_.freeze_variance_after;
  }
  // sqrt of the second moment's bias correction at the freeze.
  float FrozenBiasCorrectionSqrt() const;
  // The workers keep the first moment once the variance froze.
  static void ReleaseFirstMoment(OptimizerState* state) {
    std::vector<float>().swap(state->first_moment);
  }
  void ApplyFrozen(double lr, absl::Span<float> weights,
                   absl::Span<const float> velocity,
                   OptimizerState* state) const;

  const OptimizerSettings settings_;
  // AdamW decays the weights before the step; Adam folds the decay into g.
  const bool decoupled_;
};

float AdamRule::FrozenBiasCorrectionSqrt() const {
  // The second moment was last updated at t = F.
  const double frozen_t = static_cast<double>(settings_.freeze_variance_after);
  return static_cast<float>(
      std::sqrt(1.0 - std::pow(settings_.beta2, frozen_t)));
}

void AdamRule::Apply(double lr, absl::Span<float> weights,
                     absl::Span<const float> gradient,
                     OptimizerState* state) const {
  if (VarianceFrozenAt(state->updates)) {
    return ApplyFrozen(lr, weights, gradient, state);
  }
  const double beta1 = settings_.momentum;
  const double beta2 = settings_.beta2;
  const double t = static_cast<double>(state->updates + 1);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  const bool decoupled = decoupled_;
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

void AdamRule::ApplyFrozen(double lr, absl::Span<float> weights,
                           absl::Span<const float> velocity,
                           OptimizerState* state) const {
  const float bc2_sqrt = FrozenBiasCorrectionSqrt();
  const bool decoupled = decoupled_;
  const float decay = static_cast<float>(1.0 - lr * settings_.weight_decay);
  const float wd =
      decoupled ? 0.0f : static_cast<float>(settings_.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - settings_.momentum);
  const float eps = static_cast<float>(settings_.epsilon);
  const float neg_lr = static_cast<float>(-lr);
  ReleaseFirstMoment(state);
  assert(state->second_moment.size() == weights.size());
  const float* v = state->second_moment.data();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (decoupled) weights[i] *= decay;
    const float m = one_minus_beta1 * velocity[i] + wd * weights[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    weights[i] += neg_lr * m / denom;
  }
}

// ApplyFrozen's expression without weight decay, at the selected elements.
bool AdamRule::ApplyAt(float neg_lr, absl::Span<const float> weights,
                       const OptimizerState& state,
                       absl::Span<const uint32_t> indices,
                       absl::Span<const float> values, uint64_t update,
                       absl::Span<float> out) const {
  assert(state.second_moment.size() == weights.size());
  const float* v = state.second_moment.data();
  const float bc2_sqrt = FrozenBiasCorrectionSqrt();
  const float one_minus_beta1 = static_cast<float>(1.0 - settings_.momentum);
  const float eps = static_cast<float>(settings_.epsilon);
  return SelectedLoop(weights.data(), v, indices.data(), values.data(),
                      indices.size(), out.data(),
                      [=](float w, float velocity, uint32_t i) {
                        const float m = one_minus_beta1 * velocity;
                        const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
                        return w + neg_lr * m / denom;
                      });
}

}  // namespace

std::unique_ptr<OptimizerRule> MakeAdamRule(const OptimizerSettings& settings) {
  return std::make_unique<AdamRule>(settings);
}

}  // namespace gradwire
