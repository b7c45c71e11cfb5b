// Heavy-ball and Nesterov momentum, as torch.optim.SGD runs them with
// dampening 0. At momentum 0 torch.optim.SGD keeps no buffer and the rule is
// plain SGD: Optimizer runs optimizer_sgd.cc's rule then, not this one.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "server/shard/optimizer.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {
namespace {

class MomentumRule final : public OptimizerRule {
 public:
  explicit MomentumRule(const OptimizerSettings& settings)
      : settings_(settings) {
    assert(settings_.momentum > 0.0);
  }

  void Apply(double lr, absl::Span<float> weights,
             absl::Span<const float> gradient,
             OptimizerState* state) const override;

  // The buffer decays at every update, so every weight moves.
  bool UpdatesOnlySelected(uint64_t update) const override { return false; }

 private:
  const OptimizerSettings settings_;
};

void MomentumRule::Apply(double lr, absl::Span<float> weights,
                         absl::Span<const float> gradient,
                         OptimizerState* state) const {
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

}  // namespace

std::unique_ptr<OptimizerRule> MakeMomentumRule(
    const OptimizerSettings& settings) {
  return std::make_unique<MomentumRule>(settings);
}

}  // namespace gradwire
