// The update rule of one optimizer kind, behind the Optimizer that a shard
// holds (internal to server/shard/). One kind per file: optimizer_sgd.cc,
// optimizer_momentum.cc, optimizer_adam.cc (Adam, AdamW and their frozen
// form), optimizer_mean.cc; Optimizer picks the rule once, from the settings,
// and adds what every kind shares: the learning rate of the update and its
// count.
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
#include <cstring>
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

  // Optimizer::ApplyAt at the scheduled rate `neg_lr` = -lr, returning
  // whether every value written is finite. Called only where
  // UpdatesOnlySelected(update); the default, for a rule where that never
  // holds, is not reached.
  virtual bool ApplyAt(float neg_lr, absl::Span<const float> weights,
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

inline bool OptimizerRule::ApplyAt(float, absl::Span<const float>,
                                   const OptimizerState&,
                                   absl::Span<const uint32_t>,
                                   absl::Span<const float>, uint64_t,
                                   absl::Span<float>) const {
  assert(false && "ApplyAt without UpdatesOnlySelected");
  return false;
}

// The rules, one per file. `settings` is valid. MakeSgdRule also serves
// kMomentum at momentum 0 (torch.optim.SGD keeps no buffer then: the rule is
// plain SGD); MakeMomentumRule requires momentum > 0; MakeAdamRule serves
// kAdam and kAdamW.
std::unique_ptr<OptimizerRule> MakeSgdRule(const OptimizerSettings& settings);
std::unique_ptr<OptimizerRule> MakeMomentumRule(
    const OptimizerSettings& settings);
std::unique_ptr<OptimizerRule> MakeAdamRule(const OptimizerSettings& settings);
std::unique_ptr<OptimizerRule> MakeMeanRule();

// ApplyAt's reads miss the cache about once per element (sorted, sparse
// indices a cache line or more apart): it fetches this many elements
// ahead, far enough to cover a miss to memory at a few nanoseconds an
// element (docs/benchmarks/server.md#the-scattered-apply).
inline constexpr size_t kApplyAtPrefetchAhead = 64;

// For loops over scattered positions other than SelectedLoop: asks for the
// lines of `first` and, when set, `second` at the position
// kApplyAtPrefetchAhead after positions[j], for writing.
inline void PrefetchAhead(absl::Span<const uint32_t> positions, size_t j,
                          const float* first, const float* second) {
  if (j + kApplyAtPrefetchAhead >= positions.size()) return;
  const uint32_t later = positions[j + kApplyAtPrefetchAhead];
  __builtin_prefetch(first + later, 1);
  if (second != nullptr) __builtin_prefetch(second + later, 1);
}

// The loop of every rule's ApplyAt, instantiated per rule so that the
// element's expression inlines (no call and no branch per element):
// out[j] = next(weights[i], values[j], i) for i = indices[j]. The weight
// (and, with `state` set, state[i]) of the element kApplyAtPrefetchAhead
// on is fetched ahead, for writing: the shard stores the new weight there
// next. Returns whether every out[j] is finite, found in the same pass (an
// OR of exponent fields, no branch).
template <typename Next>
inline bool SelectedLoop(const float* weights, const float* state,
                         const uint32_t* indices, const float* values, size_t n,
                         float* out, Next next) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t non_finite = 0;
  const auto one = [&](size_t j) {
    const float result = next(weights[indices[j]], values[j], indices[j]);
    out[j] = result;
    uint32_t bits;
    std::memcpy(&bits, &result, sizeof(bits));
    non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  };
  const size_t ahead =
      n > kApplyAtPrefetchAhead ? n - kApplyAtPrefetchAhead : 0;
  size_t j = 0;
  for (; j < ahead; ++j) {
    const uint32_t later = indices[j + kApplyAtPrefetchAhead];
    __builtin_prefetch(&weights[later], 1);
    if (state != nullptr) __builtin_prefetch(&state[later]);
    one(j);
  }
  for (; j < n; ++j) one(j);
  return non_finite == 0;
}

// Sizes a state buffer on first use; a non-empty buffer must already fit.
inline void EnsureSized(std::vector<float>* buffer, size_t numel) {
  assert(buffer->empty() || buffer->size() == numel);
  if (buffer->empty()) buffer->assign(numel, 0.0f);
}

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_OPTIMIZER_RULE_H_
