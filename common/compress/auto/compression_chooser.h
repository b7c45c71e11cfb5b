// Compressor "auto": chooses, for each layer group, a rung of the ratio
// ladder (ratio_ladder.h) from the measured link, the measured compute and
// the gradients, so that the bytes a step pushes fit in the time the
// backward pass can hide them in.
//
// The budget. A step may push
//   B = max(0, backward * budget_fraction - latency) / per_byte,
//   per_byte = wire_overhead / rate + cpu_per_byte
// payload bytes (rate and latency from LinkEstimator; wire_overhead the
// wire bytes per payload byte; cpu_per_byte the CPU seconds that encoding
// and sending a payload byte costs the worker, which on a CPU host is taken
// from the same cores as the backward pass), times critical_boost in a
// critical phase (critical_phase.h), when compressing costs the most
// accuracy.
//
// The allocation. Group g gets the share
//   s_g = (1 - size_share) * norm_g / sum(norm) + size_share * n_g / sum(n)
// of B, norm_g being the L2 norm of its gradient and of its error-feedback
// residual together: a layer whose gradient is large, or which compression
// has left much owed, gets more bytes per element. (Giving each group B
// * s_g maximises sum(s_g * log(bytes_g)).) Each group then takes the
// highest rung that fits its share, and what the rounding down left is
// spent on the groups furthest below their share, one rung at a time.
//
// Hysteresis. A proposal replaces the current choice only after
// `patience` consecutive evaluations in which it would
//   - shorten the predicted step time
//     compute + max(0, latency + bytes * per_byte - backward)
//     by more than `improvement` of it, or
//   - fit the budget and send more than `improvement` more bytes, or
//   - move a group by two rungs or more;
// an evaluation where none holds starts the count again. So a link that
// flaps between two rates leaves the choice where it was. Entering or
// leaving a critical phase changes the choice at once: that comes from the
// gradients, not from a noisy clock.
//
// Verification. The model cannot see every cost of a byte (the shards'
// CPU on a shared host, contention), so more bytes may slow the step
// although they fit the budget. So after every change made while the step
// time (ChooserInputs::step_seconds) is measured, the step time
// `verify_after` evaluations later is compared with the fastest measured
// under any settled choice (the starting one's included, so that steps up
// that each slow the step a little cannot add up): when it grew by more than
// `improvement`, the change is undone, and when it sent more bytes the budget
// is capped at the bytes before it (critical phases included). While a change
// is judged no other change is made (a critical phase's start or end waits for
// the judgement): a change on top of it would take an unjudged choice's step
// time as its reference, and a chain of such changes could climb to bytes that
// slow the step without ever being compared with the starting choice. The cap
// loosens by `cap_growth` per evaluation, so that a changed situation is tried
// again later, and more slowly after each undo (the exponent of the growth
// halves), so that a change that keeps failing costs ever fewer slow steps.
// This holds for critical phases too: their extra bytes are sent where they do
// not slow the step. The first `settle` evaluations with a step time only
// measure the starting choice, the reference of the first change; no choice
// changes during them, critical phases included. Without a step time (0)
// nothing is verified and the choice follows the model alone.
//
// Every worker chooses on its own measurements; the shards decode each
// pushed chunk by its own encoding and average the decoded values, so
// pushes of one step may differ in rung (docs/compression.md).
//
// Thread safety: not thread-safe; one training loop drives it.
#ifndef GRADWIRE_COMMON_COMPRESS_AUTO_COMPRESSION_CHOOSER_H_
#define GRADWIRE_COMMON_COMPRESS_AUTO_COMPRESSION_CHOOSER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/compress/auto/link_estimator.h"
#include "common/compress/auto/ratio_ladder.h"
#include "common/precision.h"

namespace gradwire {

struct ChooserOptions {
  // The share of the backward time the pushes may take, in (0, 10]; above
  // 1 the pushes may outlast the backward pass.
  double budget_fraction = 1.0;
  // The budget's multiplier in a critical phase.
  double critical_boost = 4.0;
  // Hysteresis: the relative gain a change needs, and for how many
  // consecutive evaluations.
  double improvement = 0.05;
  int patience = 3;
  // Verification: evaluations until a change is judged, and the cap's
  // growth per evaluation.
  int verify_after = 6;
  double cap_growth = 1.02;
  // Evaluations with a measured step time before the first change.
  int settle = 5;
  // With a measured step time, a proposal sends at most this many times
  // the current choice's bytes: each step up is judged on its own, and one
  // that fails costs `verify_after` steps of a small excess, not of dense
  // fp32.
  double max_step_up = 4.0;
  // The share of the budget spread by group size rather than gradient norm,
  // in [0, 1].
  double size_share = 0.5;
  // As CompressorOptions::min_kept and ::precision of the pushes.
  uint64_t min_kept = 64;
  ValuePrecision precision = ValuePrecision::kFp16;
};

// One group's gradient statistics at an evaluation.
struct GroupStatistics {
  double gradient_norm = 0;
  double residual_norm = 0;
};

struct ChooserInputs {
  // None before the first transfer: the choice stays.
  std::optional<LinkEstimate> link;
  // Seconds of one step's computation (forward and backward), and of its
  // backward pass alone, which the pushes overlap.
  double compute_seconds = 0;
  double backward_seconds = 0;
  // The measured seconds of a whole step, smoothed (0: unknown).
  double step_seconds = 0;
  // Wire bytes per payload byte (framing, headers).
  double wire_overhead = 1.3;
  // CPU seconds the worker spends per payload byte sent or received
  // (encoding, the RPC stack, decoding; 0: not measured, bytes cost link
  // time only).
  double cpu_seconds_per_byte = 0;
  bool critical = false;
  // One per group, or empty (then the budget is shared by size alone).
  std::vector<GroupStatistics> groups;
};

class CompressionChooser {
 public:
  // Groups of `group_numel` elements each; every group starts at
  // kStartRung.
  CompressionChooser(ChooserOptions options, std::vector<uint64_t> group_numel);

  // One evaluation; returns whether the choice changed.
  bool Evaluate(const ChooserInputs& inputs);

  // The rung of each group.
  const std::vector<Rung>& rungs() const { return rungs_; }
  const ChooserOptions& options() const { return options_; }

  // What an evaluation of `inputs` proposes, before hysteresis.
  std::vector<Rung> Propose(const ChooserInputs& inputs) const;
  // The payload bytes a step pushes under `rungs`.
  double PayloadBytes(const std::vector<Rung>& rungs) const;
  // The payload bytes a step may push (B above, within the verification's
  // cap; 0 without a link).
  double BudgetBytes(const ChooserInputs& inputs) const;
  // The predicted step seconds under `rungs` (above; compute_seconds
  // without a link).
  double PredictStepSeconds(const std::vector<Rung>& rungs,
                            const ChooserInputs& inputs) const;

 private:
  double GroupBytes(size_t group, Rung rung) const;
  // Each group's share of the budget (s_g above).
  std::vector<double> Shares(const ChooserInputs& inputs) const;
  // Whether `candidate` beats the current choice (the three cases above).
  bool Better(const std::vector<Rung>& candidate,
              const ChooserInputs& inputs) const;
  // Verification: judges the last change once it is due; true when it was
  // undone.
  bool Verify(const ChooserInputs& inputs);
  // Makes `rungs` the choice, to be verified when a step time is known.
  void Adopt(std::vector<Rung> rungs, const ChooserInputs& inputs);

  const ChooserOptions options_;
  const std::vector<uint64_t> group_numel_;
  std::vector<Rung> rungs_;
  int pending_ = 0;
  bool critical_ = false;
  // Verification: the choice before the last change, the step time then,
  // and the evaluations left until it is judged (0: nothing to judge).
  std::vector<Rung> previous_;
  double step_before_ = 0;
  int verify_left_ = 0;
  int settled_ = 0;
  // The smallest step time measured under the current choice (0: none).
  double fastest_step_ = 0;
  // The smallest step time measured under any choice not being judged
  // (the starting choice's settle included; 0: none): every change's
  // reference.
  double best_step_ = 0;
  // The payload bytes the budget may not exceed (infinite: no cap).
  double byte_cap_;
  // The cap's growth per evaluation: cap_growth, its exponent halved at
  // each undo of a change to more bytes.
  double cap_growth_;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_AUTO_COMPRESSION_CHOOSER_H_
