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
// flaps between two rates leaves the choice where it was. Entering a
// critical phase changes the choice at once when it sends more bytes, and
// leaving one when it sends fewer: that comes from the gradients, not from
// a noisy clock. A proposal against the phase's direction (fewer bytes on
// entering one, which the exposure bound can make) waits for the
// hysteresis like any other.
//
// Exposure. Where the step took longer than its computation
// (ChooserInputs::exposed_seconds: waits for communication, and CPU the
// bytes took from the computation on shared cores)
// for more than `improvement` of the computation, the budget is at most the
// current bytes times backward / (backward + exposed): the rate those bytes
// really moved at, which the estimate of single transfers can miss (a
// token bucket, a switch buffer, the shards' CPU pass short transfers at
// line rate and slow the step after). Below the starting choice's bytes
// (Top-K 1% in every group, the project's default and the accuracy users
// compare against) the bound acts only where the exposure is above
// `below_start_exposure` of the computation: a few percent of exposure on
// shared cores comes from the CPU and the synchronisation as much as from
// the bytes, and fewer bytes there cost accuracy without making the step
// faster.
//
// Verification. The model cannot see every cost of a byte (the shards'
// CPU on a shared host, contention), so more bytes may slow the step
// although they fit the budget. So every change made while step times
// (ChooserInputs::step_seconds, one per evaluation) are measured is
// judged: against the reference, the smallest median of `window` step
// times of any settled choice (the starting one's included, so that steps
// up that each slow the step a little cannot add up), the median of the
// change's first `verify_after` step times may be at most 1 +
// `step_up_slowdown` times it for more bytes (they buy accuracy, at a
// bounded cost in time), and must be at most 1 - improvement / 2 times it
// for fewer (fewer bytes cost accuracy: they stay only where they pay), or
// 1 - improvement times it for fewer than the starting choice's bytes. A
// change within improvement / 2 of the bytes before only spreads them
// differently over the groups, and is judged as more bytes are.
// Where each of its first `early_after` steps took more than 1 +
// `early_margin` times the reference, the change is undone then. An
// undone step up caps the budget at the bytes before it (critical phases
// included); an undone step down sets a floor under the exposure bound at
// the bytes before it. While a change is judged no other change is made (a
// critical phase's start or end waits for the judgement): a change on top
// of it would take an unjudged choice's step time as its reference, and a
// chain of such changes could climb to bytes that slow the step without
// ever being compared with the starting choice. The cap loosens (and the
// floor lowers) by `cap_growth` per evaluation, so that a changed
// situation is tried again later, and more slowly after each undone step
// up (the exponent of the cap's growth halves) or step down (the floor's),
// so that a change that keeps failing costs ever fewer slow or less
// accurate steps. The first `settle` evaluations with
// a step time only measure the starting choice; no choice changes during
// them, critical phases included: the first steps of a job (allocations,
// cold caches, connections opening) run slower, and a reference taken from
// them alone would let a change that gains nothing pass as faster. Without
// a step time (0) nothing is verified and the choice follows the model
// alone.
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
  // Verification: measured steps until a change is judged (the median of
  // their times against the reference), and the cap's growth per
  // evaluation.
  int verify_after = 4;
  double cap_growth = 1.02;
  // The slowdown a change to more bytes may cost and stay: half of
  // `improvement`, so that the measured noise a change passes with, and
  // the worker's own cost of choosing, stay within 5% of a fixed setting.
  double step_up_slowdown = 0.025;
  // The early verdict: a change whose first `early_after` measured steps
  // each took more than 1 + early_margin times the reference is undone
  // then, without waiting for the rest.
  int early_after = 2;
  double early_margin = 0.2;
  // Step times of a settled choice whose median is its step time.
  int window = 4;
  // Evaluations with a measured step time before the first change: long
  // enough for the job's first, slower steps to pass.
  int settle = 8;
  // With a measured step time, a proposal sends at most this many times
  // the current choice's bytes: each step up is judged on its own, and one
  // that fails costs `verify_after` steps of a small excess, not of dense
  // fp32.
  double max_step_up = 2.0;
  // The exposure, as a fraction of the computation, above which the
  // exposure bound may take the bytes below the starting choice's.
  double below_start_exposure = 0.2;
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
  // The measured seconds of the last whole step (0: unknown); the chooser
  // takes medians of its own windows of them.
  double step_seconds = 0;
  // Seconds per step beyond the computation (the smoothed step time less
  // compute_seconds): waits for communication, and on shared cores the CPU
  // that moving the bytes took from the computation; 0: none or unknown.
  double exposed_seconds = 0;
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
  // Where the measured exposure (inputs.exposed_seconds) is above
  // `improvement` of the computation: the bytes the current choice's
  // measured rate fits in `window` seconds; infinite otherwise.
  double ExposureBound(const ChooserInputs& inputs, double window) const;
  // Each group's share of the budget (s_g above).
  std::vector<double> Shares(const ChooserInputs& inputs) const;
  // Whether `candidate` beats the current choice (the three cases above).
  bool Better(const std::vector<Rung>& candidate,
              const ChooserInputs& inputs) const;
  // Adds a measured step time to the window of the current choice, or to
  // the steps of the change being judged.
  void NoteStepTime(double seconds);
  // Verification: judges the last change once it is due; true when it was
  // undone.
  bool Verify();
  // Makes `rungs` the choice, to be verified when a step time is known.
  void Adopt(std::vector<Rung> rungs, const ChooserInputs& inputs);

  const ChooserOptions options_;
  const std::vector<uint64_t> group_numel_;
  std::vector<Rung> rungs_;
  int pending_ = 0;
  bool critical_ = false;
  // Verification: the choice before the last change, its window of step
  // times and the reference the change is judged against; whether a change
  // is being judged, and the step times measured since it.
  std::vector<Rung> previous_;
  std::vector<double> previous_window_;
  double step_before_ = 0;
  bool judging_ = false;
  std::vector<double> judged_;
  int settled_ = 0;
  // The last `window` step times of the current choice while it is not
  // being judged.
  std::vector<double> window_;
  // The smallest median of a full window of any choice not being judged
  // (the starting choice's settle included; 0: none): every change's
  // reference.
  double best_step_ = 0;
  // The payload bytes the budget may not exceed (infinite: no cap).
  double byte_cap_;
  // The bytes below which the exposure bound does not go: those of a step
  // down that was undone, shrinking by the cap's growth per evaluation.
  double byte_floor_ = 0;
  // The starting choice's payload bytes (kStartRung in every group).
  const double start_bytes_;
  // The cap's growth per evaluation: cap_growth, its exponent halved at
  // each undo of a change to more bytes; and the floor's shrinking, halved
  // at each undo of a change to fewer.
  double cap_growth_;
  double floor_growth_;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_AUTO_COMPRESSION_CHOOSER_H_
