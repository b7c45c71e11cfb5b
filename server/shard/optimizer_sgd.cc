// Plain SGD, w -= lr * (g + wd * w), and the in-place paths that only this
// rule has (Optimizer::SgdStep and the Optimizer::*Sgd* methods): with no
// per-element state, a shard may check an update and apply it in the same
// buffers, or at a sparse gradient's positions alone.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/base/attributes.h"
#include "absl/types/span.h"
#include "common/vector_clones.h"
#include "server/shard/learning_rate.h"
#include "server/shard/optimizer.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {
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

class SgdRule final : public OptimizerRule {
 public:
  explicit SgdRule(const OptimizerSettings& settings) : settings_(settings) {}

  void Apply(double lr, absl::Span<float> weights,
             absl::Span<const float> gradient,
             OptimizerState* state) const override {
    const SgdStep step{static_cast<float>(-lr),
                       static_cast<float>(settings_.weight_decay)};
    SgdLoop(step, weights.data(), gradient.data(), weights.size());
  }

  bool UpdatesOnlySelected(uint64_t update) const override {
    return settings_.weight_decay == 0.0;
  }

  bool ApplyAt(float neg_lr, absl::Span<const float> weights,
               const OptimizerState& state, absl::Span<const uint32_t> indices,
               absl::Span<const float> values, uint64_t update,
               absl::Span<float> out) const override {
    // Apply's expression (SgdStep::Next), element by element.
    const SgdStep step{neg_lr, static_cast<float>(settings_.weight_decay)};
    return SelectedLoop(
        weights.data(), nullptr, indices.data(), values.data(), indices.size(),
        out.data(),
        [step](float w, float g, uint32_t) { return step.Next(w, g); });
  }

  bool KeepsNoElementState() const override { return true; }

 private:
  const OptimizerSettings settings_;
};

}  // namespace

std::unique_ptr<OptimizerRule> MakeSgdRule(const OptimizerSettings& settings) {
  return std::make_unique<SgdRule>(settings);
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

namespace {

// weights[i] = step.Next(weights[i], gradient(j)) at i = positions[j],
// returning the largest MagnitudeBits of the new weights. The lines of the
// weights (and of `also_ahead`, when set: the array `gradient` reads) are
// asked for kApplyAtPrefetchAhead positions ahead.
template <typename Gradient>
uint32_t SgdAtPositions(Optimizer::SgdStep step, absl::Span<float> weights,
                        absl::Span<const uint32_t> positions,
                        const float* also_ahead, Gradient gradient) {
  uint32_t largest = 0;
  for (size_t j = 0; j < positions.size(); ++j) {
    PrefetchAhead(positions, j, weights.data(), also_ahead);
    const uint32_t i = positions[j];
    const float next = step.Next(weights[i], gradient(j));
    weights[i] = next;
    largest = std::max(largest, MagnitudeBits(next));
  }
  return largest;
}

GRADWIRE_VECTOR_CLONES uint32_t LargestMagnitudeBits(const float* values,
                                                     size_t n) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    largest = std::max(largest, MagnitudeBits(values[i]));
  }
  return largest;
}

}  // namespace

float Optimizer::ApplySgdAtAndClear(absl::Span<float> weights,
                                    absl::Span<float> gradient,
                                    absl::Span<const uint32_t> positions,
                                    OptimizerState* state) const {
  assert(weights.size() == gradient.size());
  assert(UpdatesOnlySelected(state->updates));
  const uint32_t largest =
      SgdAtPositions(SgdStepAt(state->updates), weights, positions,
                     gradient.data(), [&](size_t j) {
                       float& g = gradient[positions[j]];
                       const float value = g;
                       g = 0.0f;
                       return value;
                     });
  ++state->updates;
  return MagnitudeFromBits(largest);
}

float Optimizer::ApplySgdAtValues(absl::Span<float> weights,
                                  absl::Span<const uint32_t> positions,
                                  absl::Span<const float> values,
                                  PushGradient gradient,
                                  OptimizerState* state) const {
  assert(positions.size() == values.size());
  assert(UpdatesOnlySelected(state->updates));
  const SgdStep step = SgdStepAt(state->updates);
  const float share = gradient.share;
  // As a sum holds it: a zero plus the share (+0 + -0 is +0).
  const uint32_t largest =
      gradient.added_to_zero
          ? SgdAtPositions(step, weights, positions, nullptr,
                           [&](size_t j) { return 0.0f + share * values[j]; })
          : SgdAtPositions(step, weights, positions, nullptr,
                           [&](size_t j) { return values[j]; });
  ++state->updates;
  return MagnitudeFromBits(largest);
}

float LargestMagnitude(absl::Span<const float> values) {
  return MagnitudeFromBits(LargestMagnitudeBits(values.data(), values.size()));
}

}  // namespace gradwire
