// Server-side optimizers: the update rule a shard runs on a chunk.
//
// A shard runs one optimizer update per chunk whenever the chunk's aggregated
// gradient is complete. The optimizer works on plain float buffers (no
// libtorch) and reproduces the update rules of PyTorch's torch.optim.SGD
// (with and without momentum, dampening 0), torch.optim.Adam and
// torch.optim.AdamW (amsgrad=False, maximize=False), including the order of
// their element-wise operations (the single-tensor, foreach=False code path).
// Results therefore agree with PyTorch to float rounding; they are not
// promised to be bit-identical, because PyTorch's vectorised kernels may fuse
// multiply-adds differently.
//
// Per-chunk state (update count, momentum / Adam moments) lives in an
// OptimizerState that the caller owns and passes in, so one Optimizer serves
// every chunk of a shard and the state can be checkpointed as plain data.
//
// The settings, their validation and proto form are optimizer_settings.h's;
// the learning-rate schedule is learning_rate.h's; this header includes both.
// Each kind's rule has a file of its own (optimizer_rule.h).
#ifndef GRADWIRE_SERVER_SHARD_OPTIMIZER_H_
#define GRADWIRE_SERVER_SHARD_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "server/shard/learning_rate.h"
#include "server/shard/optimizer_settings.h"

namespace gradwire {

class OptimizerRule;

// Optimizer state of one chunk. Plain data so that checkpoints can store it.
// A default-constructed state is the state before the first update; the
// buffers are sized to the chunk's numel by the first update that needs them
// and stay empty for kinds that do not (kSgd, and kMomentum at momentum 0, use
// neither; kMomentum only first_moment). An Adam chunk whose variance froze
// releases first_moment: the workers keep it.
struct OptimizerState {
  // Updates applied so far; the next update's 0-based index.
  uint64_t updates = 0;
  // kMomentum: the momentum buffer (absent before the first update, as in
  // PyTorch). kAdam / kAdamW: the first moment m.
  std::vector<float> first_moment;
  // kAdam / kAdamW: the second moment v.
  std::vector<float> second_moment;
};

// Applies one optimizer update to one chunk.
//
// Thread safety: Apply is const and keeps nothing between calls, so several
// threads may update different chunks with one Optimizer at once. Calls for
// the same chunk (the same OptimizerState) must be serialised by the caller.
class Optimizer {
 public:
  // Precondition: `settings` is valid (ValidateOptimizerSettings is OK);
  // OptimizerSettingsFromProto guarantees it. Not copyable: shards hold
  // theirs by pointer.
  explicit Optimizer(OptimizerSettings settings);
  ~Optimizer();

  // Updates `weights` in place with `gradient`, using the learning rate of
  // update state->updates, then increments state->updates.
  //
  // Preconditions: gradient.size() == weights.size(); state is non-null and
  // its buffers are either empty or weights.size() long. Gradients must be
  // finite (the shard validates pushes); the optimizer does not check.
  //
  // Update rules, with g the gradient, lr the scheduled learning rate, wd the
  // weight decay and t = state->updates + 1:
  //   kSgd:      g += wd*w;  w -= lr*g
  //   kMomentum: g += wd*w;  buf = g on the first update, else
  //              buf = momentum*buf + g;  g = nesterov ? g + momentum*buf
  //              : buf;  w -= lr*g
  //   kAdam:     g += wd*w;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
  //              w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
  //   kAdamW:    w *= 1 - lr*wd;  then kAdam's rule without the wd term
  //   kMean:     w = g (the shards hand the mean on; no learning rate)
  // where b1 = momentum and b2 = beta2. Bias corrections are computed in
  // double.
  //
  // With freeze_variance_after = F > 0, kAdam / kAdamW run that rule for
  // their first F updates; from update F on (t > F), the gradient g is the
  // workers' velocity u = b1*u + grad (their first moment is (1-b1)*u),
  // and with v and the bias correction frozen at their values of update F:
  //   kAdam:     w -= lr * ((1-b1)*g + wd*w) / (sqrt(v / (1-b2^F)) + eps)
  //   kAdamW:    w *= 1 - lr*wd;  w -= lr * (1-b1)*g / (sqrt(...) + eps)
  // The update is linear in g, so error feedback's sum of pushes is the
  // sum of the velocities (Tang et al., "1-bit Adam", ICML 2021).
  void Apply(absl::Span<float> weights, absl::Span<const float> gradient,
             OptimizerState* state) const;

  // Whether update number `update` (OptimizerState::updates before it),
  // with a gradient that is zero at an element, leaves that element's
  // weight and optimizer state as they were, so that a sparse gradient may
  // be applied at its selected elements alone (ApplyAt): kSgd, or
  // kMomentum at momentum 0, and kAdam / kAdamW past freeze_variance_after
  // (its state no longer changes), each without weight decay. Every other
  // rule moves every element at every update (weight decay shrinks each
  // weight, momentum and Adam's moments decay and keep stepping), so a
  // sparse gradient runs the dense Apply: a lazy rule that skipped
  // untouched elements would train differently from PyTorch.
  bool UpdatesOnlySelected(uint64_t update) const;

  // What Apply would make of the weights at `indices` for a gradient that
  // is `values` there and zero everywhere else, for update number
  // `update`, written to `out`; neither the weights nor `state` are
  // changed. Elements outside `indices` keep their weights, bit for bit as
  // Apply would leave them (up to the sign of a zero weight). The caller
  // stores `out` and then calls FinishSelectedUpdate on the state. Returns
  // whether every value written to `out` is finite (found in the same
  // pass). Cost: one scattered read (two for frozen Adam, which reads the
  // second moment) per selected element, fetched ahead of its use.
  //
  // Preconditions: UpdatesOnlySelected(update); indices, values and out
  // have the same length; every index is < weights.size() and appears
  // once; for frozen Adam, state.second_moment has weights.size() elements.
  bool ApplyAt(absl::Span<const float> weights, const OptimizerState& state,
               absl::Span<const uint32_t> indices,
               absl::Span<const float> values, uint64_t update,
               absl::Span<float> out) const;

  // The state's part of an ApplyAt update: counts it, and releases what
  // the rule no longer keeps (frozen Adam's first moment), so that the
  // state is the one Apply would leave.
  void FinishSelectedUpdate(OptimizerState* state) const;

  // Whether Apply keeps no per-element state: kSgd, or kMomentum at
  // momentum 0. Each weight then moves by w += -lr * (g + wd * w) alone
  // (SgdStep), so a shard can check an update's values without keeping
  // them and then apply it in place (ApplySgdAndClear).
  bool KeepsNoElementState() const;

  // One element of such an update, as Apply computes it, bit for bit.
  struct SgdStep {
    float neg_lr;
    float weight_decay;
    float Next(float weight, float gradient) const {
      return weight + neg_lr * (gradient + weight_decay * weight);
    }
    // Whether Next(w, g) is finite for every |w| <= weight_bound and
    // |g| <= gradient_bound, proven from the two bounds alone (no pass over
    // the values). False when the bounds leave room for an overflow, or
    // are not finite: it then proves nothing either way.
    bool FiniteWithin(float weight_bound, float gradient_bound) const;
  };
  // The step of update number `update`. Precondition: KeepsNoElementState.
  SgdStep SgdStepAt(uint64_t update) const;

  // Whether Apply would leave every weight finite with `gradient`, for
  // update number `update`; reads, writes nothing. Precondition:
  // KeepsNoElementState; equal sizes.
  bool SgdUpdateFinite(absl::Span<const float> weights,
                       absl::Span<const float> gradient, uint64_t update) const;

  // The same for the gradient sum[i] + share * addend[i], each element
  // computed as AccumulateInto adds a dense push to a step's sum (a BSP
  // step's sum with the dense push that completes it, before it is added).
  // Precondition: KeepsNoElementState; equal sizes.
  bool SgdUpdateFinite(absl::Span<const float> weights,
                       absl::Span<const float> sum,
                       absl::Span<const float> addend, float share,
                       uint64_t update) const;

  // Apply under such a rule, in the same pass finding the largest |new
  // weight| and returning it: the weight bound of the next update's
  // FiniteWithin. Bit for bit Apply's weights.
  // Precondition: KeepsNoElementState; equal sizes; the update was checked
  // finite (else the returned value is not finite either).
  float ApplySgdBounded(absl::Span<float> weights,
                        absl::Span<const float> gradient,
                        OptimizerState* state) const;

  // The same, zeroing `gradient` in the same pass (a BSP step's sum, which
  // starts the next step at zero).
  float ApplySgdAndClear(absl::Span<float> weights, absl::Span<float> gradient,
                         OptimizerState* state) const;

  // ApplySgdAndClear for a gradient that may be non-zero only at
  // `positions` (repeats allowed): each position's weight takes its step
  // and its gradient is zeroed; every other weight stays as the dense rule
  // would leave it, bit for bit (a zero gradient leaves a weight as it is
  // under such a rule, and a repeated position sees its gradient already
  // zeroed). Returns the largest |new weight| at the positions, 0 for none.
  // Precondition: KeepsNoElementState and UpdatesOnlySelected(updates);
  // every position < weights.size() == gradient.size().
  float ApplySgdAtAndClear(absl::Span<float> weights,
                           absl::Span<float> gradient,
                           absl::Span<const uint32_t> positions,
                           OptimizerState* state) const;

  // How ApplySgdAtValues makes the gradient at positions[j] from
  // values[j]: as it is (an ASP/SSP push), or as a BSP step's sum holds a
  // push's share added to zero, 0 + share * values[j] (the bits
  // AccumulateInto would leave, signed zeros included).
  struct PushGradient {
    bool added_to_zero = false;
    float share = 1.0f;
  };

  // ApplySgdAtAndClear of a gradient that is non-zero only at the distinct
  // `positions`, made from `values` as `gradient` says, without a gradient
  // buffer. Returns the largest |new weight| at the positions, 0 for none.
  // Precondition: KeepsNoElementState and UpdatesOnlySelected(updates);
  // every position < weights.size(); values.size() == positions.size().
  float ApplySgdAtValues(absl::Span<float> weights,
                         absl::Span<const uint32_t> positions,
                         absl::Span<const float> values, PushGradient gradient,
                         OptimizerState* state) const;

  const OptimizerSettings& settings() const { return settings_; }

 private:
  const OptimizerSettings settings_;
  // The kind's update rule, chosen once from settings_.
  const std::unique_ptr<const OptimizerRule> rule_;
};

// The two ways of Optimizer::PushGradient.
inline Optimizer::PushGradient AsTheyAre() { return {}; }
inline Optimizer::PushGradient SumOfOne(float share) { return {true, share}; }

// The largest |value| of `values` (0 for none; NaN when one is NaN).
float LargestMagnitude(absl::Span<const float> values);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_OPTIMIZER_H_
