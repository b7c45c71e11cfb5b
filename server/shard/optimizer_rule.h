// The update rule of one optimizer kind, behind the Optimizer that a shard
// holds (internal to server/shard/). One kind per file: optimizer_sgd.cc,
// optimizer_momentum.cc, optimizer_adam.cc (Adam, AdamW and their frozen
// form); Optimizer picks the rule once, from the settings, and adds what
// every kind shares: the learning rate of the update and its count.
//
// Optimizer::Apply states each rule. The loops follow torch.optim's
// single-tensor code path operation by operation, with scalars cast to
// float where PyTorch's float kernels do, so the results agree with PyTorch
// to float rounding. Files holding such loops are built with
// -ffp-contract=off (server/shard/CMakeLists.txt): no fused multiply-adds,
// so that every path of an update, the in-place one included, gives the same
// bits whatever flags a build adds.
//
// A rule holds its settings and nothing else; every method is const and a
// rule is safe to share between threads.
#ifndef GRADWIRE_SERVER_SHARD_OPTIMIZER_RULE_H_
#define GRADWIRE_SERVER_SHARD_OPTIMIZER_RULE_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "server/shard/optimizer.h"

namespace gradwire {

class OptimizerRule {
 public:
  virtual ~OptimizerRule() = default;

  // Optimizer::Apply at learning rate `lr`, for update number
  // state->updates, without counting the update (the caller does).
  virtual void Apply(double lr, absl::Span<float> weights,
                     absl::Span<const float> gradient,
                     OptimizerState* state) const = 0;

  // Optimizer::UpdatesOnlySelected.
  virtual bool UpdatesOnlySelected(uint64_t update) const = 0;

  // Optimizer::ApplyAt at the scheduled rate `neg_lr` = -lr. Called only
  // where UpdatesOnlySelected(update); the default, for a rule where that
  // never holds, is not reached.
  virtual void ApplyAt(float neg_lr, absl::Span<const float> weights,
                       const OptimizerState& state,
                       absl::Span<const uint32_t> indices,
                       absl::Span<const float> values, uint64_t update,
                       absl::Span<float> out) const;

  // The state's part of an ApplyAt update other than its count: releases
  // what the rule no longer keeps. The default keeps everything.
  virtual void FinishSelectedUpdate(OptimizerState* /*state*/) const {}

  // Optimizer::KeepsNoElementState: true for the SGD rule alone.
  virtual bool KeepsNoElementState() const { return false; }
};

inline void OptimizerRule::ApplyAt(float, absl::Span<const float>,
                                   const OptimizerState&,
                                   absl::Span<const uint32_t>,
                                   absl::Span<const float>, uint64_t,
                                   absl::Span<float>) const {
  assert(false && "ApplyAt without UpdatesOnlySelected");
}

// The rules, one per file. `settings` is valid. MakeSgdRule also serves
// kMomentum at momentum 0 (torch.optim.SGD keeps no buffer then: the rule is
// plain SGD); MakeMomentumRule requires momentum > 0; MakeAdamRule serves
// kAdam and kAdamW.
std::unique_ptr<OptimizerRule> MakeSgdRule(const OptimizerSettings& settings);
std::unique_ptr<OptimizerRule> MakeMomentumRule(
    const OptimizerSettings& settings);
std::unique_ptr<OptimizerRule> MakeAdamRule(const OptimizerSettings& settings);

// ApplyAt's reads miss the cache about once per element (sorted, sparse
// indices): it fetches this many elements ahead.
inline constexpr size_t kApplyAtPrefetchAhead = 16;

// Sizes a state buffer on first use; a non-empty buffer must already fit.
inline void EnsureSized(std::vector<float>* buffer, size_t numel) {
  assert(buffer->empty() || buffer->size() == numel);
  if (buffer->empty()) buffer->assign(numel, 0.0f);
}

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_OPTIMIZER_RULE_H_
