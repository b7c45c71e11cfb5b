// The dispatch: Optimizer picks its kind's rule once and adds what every
// kind shares, the learning rate of each update and its count. The rules
// are in optimizer_sgd.cc (with the in-place SGD paths, the Optimizer
// methods named Sgd*), optimizer_momentum.cc, optimizer_adam.cc and
// optimizer_mean.cc.
#include "server/shard/optimizer.h"

#include <cassert>
#include <memory>
#include <utility>

#include "server/shard/learning_rate.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {
namespace {

using Kind = OptimizerSettings::Kind;

std::unique_ptr<OptimizerRule> MakeRule(const OptimizerSettings& settings) {
  switch (settings.kind) {
    case Kind::kSgd:
      return MakeSgdRule(settings);
    case Kind::kMomentum:
      // torch.optim.SGD keeps no buffer at momentum 0: plain SGD.
      return settings.momentum == 0.0 ? MakeSgdRule(settings)
                                      : MakeMomentumRule(settings);
    case Kind::kAdam:
    case Kind::kAdamW:
      return MakeAdamRule(settings);
    case Kind::kMean:
      return MakeMeanRule();
  }
  return MakeSgdRule(settings);  // Not reached: every kind is named above.
}

}  // namespace

Optimizer::Optimizer(OptimizerSettings settings)
    : settings_(std::move(settings)), rule_(MakeRule(settings_)) {}

Optimizer::~Optimizer() = default;

void Optimizer::Apply(absl::Span<float> weights,
                      absl::Span<const float> gradient,
                      OptimizerState* state) const {
  assert(state != nullptr);
  assert(weights.size() == gradient.size());
  rule_->Apply(LearningRateAt(settings_, state->updates), weights, gradient,
               state);
  ++state->updates;
}

bool Optimizer::UpdatesOnlySelected(uint64_t update) const {
  return rule_->UpdatesOnlySelected(update);
}

bool Optimizer::ApplyAt(absl::Span<const float> weights,
                        const OptimizerState& state,
                        absl::Span<const uint32_t> indices,
                        absl::Span<const float> values, uint64_t update,
                        absl::Span<float> out) const {
  assert(UpdatesOnlySelected(update));
  assert(indices.size() == values.size() && values.size() == out.size());
  const float neg_lr = static_cast<float>(-LearningRateAt(settings_, update));
  return rule_->ApplyAt(neg_lr, weights, state, indices, values, update, out);
}

void Optimizer::FinishSelectedUpdate(OptimizerState* state) const {
  rule_->FinishSelectedUpdate(state);
  ++state->updates;
}

bool Optimizer::KeepsNoElementState() const {
  return rule_->KeepsNoElementState();
}

}  // namespace gradwire
