#include "common/compress/auto/compression_chooser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

namespace gradwire {

CompressionChooser::CompressionChooser(ChooserOptions options,
                                       std::vector<uint64_t> group_numel)
    : options_(options),
      group_numel_(std::move(group_numel)),
      rungs_(group_numel_.size(), kStartRung),
      byte_cap_(std::numeric_limits<double>::infinity()),
      start_bytes_(PayloadBytes(rungs_)),
      cap_growth_(options_.cap_growth),
      floor_growth_(options_.cap_growth) {}

namespace {

// Seconds per payload byte: the link's time and the worker's CPU.
double SecondsPerByte(const ChooserInputs& inputs) {
  const double cpu = std::isfinite(inputs.cpu_seconds_per_byte)
                         ? std::max(inputs.cpu_seconds_per_byte, 0.0)
                         : 0.0;
  return std::max(inputs.wire_overhead, 1e-9) / inputs.link->bytes_per_second +
         cpu;
}

}  // namespace

double CompressionChooser::GroupBytes(size_t group, Rung rung) const {
  return RungPayloadBytes(rung, group_numel_[group], options_.min_kept,
                          options_.precision);
}

double CompressionChooser::PayloadBytes(const std::vector<Rung>& rungs) const {
  double bytes = 0;
  for (size_t g = 0; g < rungs.size(); ++g) bytes += GroupBytes(g, rungs[g]);
  return bytes;
}

double CompressionChooser::BudgetBytes(const ChooserInputs& inputs) const {
  if (!inputs.link || !(inputs.link->bytes_per_second > 0)) return 0;
  const double window =
      std::max(0.0, inputs.backward_seconds * options_.budget_fraction -
                        inputs.link->latency_seconds);
  const double boost = inputs.critical ? options_.critical_boost : 1.0;
  const double budget = window / SecondsPerByte(inputs) * boost;
  // The cap and the exposure bound a critical phase's bytes too: they are
  // sent only where they do not slow the step.
  return std::min({budget, ExposureBound(inputs, window), byte_cap_});
}

double CompressionChooser::ExposureBound(const ChooserInputs& inputs,
                                         double window) const {
  const double exposed = inputs.exposed_seconds;
  if (!(exposed > options_.improvement * inputs.compute_seconds)) {
    return std::numeric_limits<double>::infinity();
  }
  // The current bytes took about backward + exposed seconds to move where
  // the backward pass was to hide them: the link (or the shards) moved
  // bytes / (backward + exposed) per second, whatever the estimate of
  // single transfers says (a token bucket passes a short transfer at line
  // rate).
  const double bound =
      PayloadBytes(rungs_) * window / (inputs.backward_seconds + exposed);
  // Not below the bytes of a step down that did not pay: exposure that
  // fewer bytes did not shorten comes from elsewhere (a straggler, the
  // shards' CPU). Nor below the starting choice's bytes unless the
  // exposure is large: a small one may be the CPU's, and fewer bytes than
  // the default cost accuracy for little time.
  const bool large =
      exposed > options_.below_start_exposure * inputs.compute_seconds;
  return std::max({bound, byte_floor_, large ? 0.0 : start_bytes_});
}

double CompressionChooser::PredictStepSeconds(
    const std::vector<Rung>& rungs, const ChooserInputs& inputs) const {
  if (!inputs.link || !(inputs.link->bytes_per_second > 0)) {
    return inputs.compute_seconds;
  }
  const double transfer = inputs.link->latency_seconds +
                          PayloadBytes(rungs) * SecondsPerByte(inputs);
  return inputs.compute_seconds +
         std::max(0.0, transfer - inputs.backward_seconds);
}

std::vector<double> CompressionChooser::Shares(
    const ChooserInputs& inputs) const {
  const size_t n = group_numel_.size();
  double total_numel = 0;
  for (const uint64_t numel : group_numel_) total_numel += numel;
  std::vector<double> norms(n, 0.0);
  double total_norm = 0;
  if (inputs.groups.size() == n) {
    for (size_t g = 0; g < n; ++g) {
      const GroupStatistics& s = inputs.groups[g];
      const double norm = std::hypot(s.gradient_norm, s.residual_norm);
      norms[g] = std::isfinite(norm) ? norm : 0.0;
      total_norm += norms[g];
    }
  }
  const double by_size =
      total_norm > 0 ? std::clamp(options_.size_share, 0.0, 1.0) : 1.0;
  std::vector<double> shares(n);
  for (size_t g = 0; g < n; ++g) {
    shares[g] = by_size * group_numel_[g] / std::max(total_numel, 1.0);
    if (total_norm > 0) shares[g] += (1 - by_size) * norms[g] / total_norm;
  }
  return shares;
}

std::vector<Rung> CompressionChooser::Propose(
    const ChooserInputs& inputs) const {
  double budget = BudgetBytes(inputs);
  if (inputs.step_seconds > 0) {
    budget = std::min(
        budget, std::max(options_.max_step_up, 1.0) * PayloadBytes(rungs_));
  }
  const std::vector<double> shares = Shares(inputs);
  const size_t n = group_numel_.size();
  std::vector<Rung> rungs(n, 0);
  double spent = 0;
  for (size_t g = 0; g < n; ++g) {
    // The highest rung within the share; the cheapest when none is (a
    // tiny group may cost less dense than sparse with its min_kept).
    Rung cheapest = 0;
    for (Rung r = 0; r < kRungCount; ++r) {
      if (GroupBytes(g, r) < GroupBytes(g, cheapest)) cheapest = r;
    }
    rungs[g] = cheapest;
    for (Rung r = kRungCount - 1; r >= 0; --r) {
      if (GroupBytes(g, r) <= budget * shares[g]) {
        rungs[g] = r;
        break;
      }
    }
    spent += GroupBytes(g, rungs[g]);
  }
  // What rounding down left: one rung at a time to the group furthest
  // below its share.
  while (true) {
    size_t best = n;
    double best_gap = 0;
    for (size_t g = 0; g < n; ++g) {
      if (rungs[g] + 1 >= kRungCount) continue;
      const double extra =
          GroupBytes(g, rungs[g] + 1) - GroupBytes(g, rungs[g]);
      if (spent + extra > budget) continue;
      const double gap = shares[g] * budget / GroupBytes(g, rungs[g]);
      if (best == n || gap > best_gap) {
        best = g;
        best_gap = gap;
      }
    }
    if (best == n) break;
    spent += GroupBytes(best, rungs[best] + 1) - GroupBytes(best, rungs[best]);
    ++rungs[best];
  }
  return rungs;
}

bool CompressionChooser::Better(const std::vector<Rung>& candidate,
                                const ChooserInputs& inputs) const {
  const double x = options_.improvement;
  const double now = PredictStepSeconds(rungs_, inputs);
  if (PredictStepSeconds(candidate, inputs) < now * (1 - x)) return true;
  const double bytes = PayloadBytes(candidate);
  if (bytes <= BudgetBytes(inputs) && bytes > PayloadBytes(rungs_) * (1 + x)) {
    return true;
  }
  for (size_t g = 0; g < candidate.size(); ++g) {
    if (std::abs(candidate[g] - rungs_[g]) >= 2) return true;
  }
  return false;
}

namespace {

double Median(std::vector<double> times) {
  if (times.empty()) return 0;
  const auto middle = times.begin() + times.size() / 2;
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

}  // namespace

void CompressionChooser::NoteStepTime(double seconds) {
  if (!(seconds > 0)) return;
  if (judging_) {
    judged_.push_back(seconds);
    return;
  }
  window_.push_back(seconds);
  const size_t keep = static_cast<size_t>(std::max(options_.window, 1));
  if (window_.size() > keep) window_.erase(window_.begin());
  // A settled choice's reference once its window is full: the median, so
  // that one slow or fast step does not set it.
  if (window_.size() == keep) {
    const double median = Median(window_);
    if (best_step_ == 0 || median < best_step_) best_step_ = median;
  }
}

bool CompressionChooser::Verify() {
  if (!judging_) return false;
  const size_t n = judged_.size();
  const double reference = step_before_;
  const bool clearly_slower =
      n >= static_cast<size_t>(std::max(options_.early_after, 1)) &&
      *std::min_element(judged_.begin(), judged_.end()) >
          reference * (1 + options_.early_margin);
  if (!clearly_slower &&
      n < static_cast<size_t>(std::max(options_.verify_after, 1))) {
    return false;
  }
  judging_ = false;
  // Fewer bytes cost accuracy: they stay only where they make the step
  // faster, by half the threshold, or by all of it below the starting
  // choice's bytes. A change within half the threshold of the bytes
  // before spreads them differently over the groups: judged as a step up,
  // and its undoing leaves neither a cap nor a floor.
  const double bytes = PayloadBytes(rungs_);
  const double before = PayloadBytes(previous_);
  const bool fewer = bytes < before * (1 - options_.improvement / 2);
  const bool more = bytes > before * (1 + options_.improvement / 2);
  const double gain =
      bytes < start_bytes_ ? options_.improvement : options_.improvement / 2;
  const double limit = fewer ? 1 - gain : 1 + options_.step_up_slowdown;
  const bool slower = clearly_slower || Median(judged_) > reference * limit;
  if (!slower) {
    // Kept: its judged steps are its window.
    window_.clear();
    for (const double t : judged_) NoteStepTime(t);
    judged_.clear();
    return false;
  }
  judged_.clear();
  if (more) {
    byte_cap_ = before;
    cap_growth_ = std::sqrt(cap_growth_);
  } else if (fewer) {
    byte_floor_ = before;
    floor_growth_ = std::sqrt(floor_growth_);
  }
  rungs_ = previous_;
  pending_ = 0;
  // The restored choice's window is what it measured before.
  window_ = previous_window_;
  return true;
}

void CompressionChooser::Adopt(std::vector<Rung> rungs,
                               const ChooserInputs& inputs) {
  judging_ = false;
  if (inputs.step_seconds > 0 && !window_.empty()) {
    previous_ = rungs_;
    previous_window_ = window_;
    // Judged against the fastest settled choice, the starting one's
    // included: steps up that each slow the step a little below the
    // threshold cannot add up.
    step_before_ = best_step_ > 0 ? best_step_ : Median(window_);
    judging_ = true;
    judged_.clear();
  }
  rungs_ = std::move(rungs);
  pending_ = 0;
  window_.clear();
}

bool CompressionChooser::Evaluate(const ChooserInputs& inputs) {
  if (!inputs.link || !(inputs.link->bytes_per_second > 0) ||
      !(inputs.backward_seconds > 0)) {
    return false;
  }
  if (std::isfinite(byte_cap_)) byte_cap_ *= cap_growth_;
  byte_floor_ /= floor_growth_;
  NoteStepTime(inputs.step_seconds);
  // The starting choice's step time first: what the first change is
  // verified against.
  if (inputs.step_seconds > 0 && settled_ < options_.settle) {
    ++settled_;
    return false;
  }
  if (Verify()) return true;
  // While a change is judged nothing else changes (a critical phase's
  // start or end included, seen once it is judged): a change made on top
  // would take the unjudged choice's step time as its reference.
  if (judging_) {
    pending_ = 0;
    return false;
  }
  const std::vector<Rung> candidate = Propose(inputs);
  const bool phase_changed = inputs.critical != critical_;
  critical_ = inputs.critical;
  if (candidate == rungs_) {
    pending_ = 0;
    return false;
  }
  // A phase's start adds bytes at once and its end removes them at once;
  // a move the other way is an ordinary proposal.
  const bool more = PayloadBytes(candidate) > PayloadBytes(rungs_);
  if (phase_changed && more == inputs.critical) {
    Adopt(candidate, inputs);
    return true;
  }
  if (!Better(candidate, inputs)) {
    pending_ = 0;
    return false;
  }
  if (++pending_ < std::max(options_.patience, 1)) return false;
  Adopt(candidate, inputs);
  return true;
}

}  // namespace gradwire
