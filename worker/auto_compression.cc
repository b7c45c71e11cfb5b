#include "worker/auto_compression.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/compress/registry.h"

namespace gradwire {
namespace {

// EWMA weight of each step's compute timings.
constexpr double kComputeSmoothing = 0.3;

// The backward pass's share of a step's computation (it does about twice
// the forward pass's work), for the CPU measure, which does not see the
// backward pass apart.
constexpr double kBackwardShare = 2.0 / 3.0;

double Smoothed(double previous, double sample) {
  if (!(sample > 0)) return previous;
  return previous > 0
             ? (1 - kComputeSmoothing) * previous + kComputeSmoothing * sample
             : sample;
}

}  // namespace

double ScheduledLearningRate(const v1::OptimizerConfig& optimizer,
                             uint64_t update) {
  const double lr = optimizer.learning_rate();
  const uint64_t warmup = optimizer.warmup_updates();
  if (update < warmup) return lr * (update + 1) / warmup;
  const uint64_t u = update - warmup;
  switch (optimizer.schedule()) {
    case v1::LR_SCHEDULE_KIND_STEP:
      if (optimizer.step_size() == 0) return lr;
      return lr * std::pow(optimizer.gamma(),
                           static_cast<double>(u / optimizer.step_size()));
    case v1::LR_SCHEDULE_KIND_COSINE: {
      const uint64_t total = optimizer.total_updates();
      if (total == 0) return lr;
      const double t = std::min(1.0, static_cast<double>(u) / total);
      const double floor = optimizer.min_learning_rate();
      return floor + (lr - floor) * 0.5 * (1 + std::cos(M_PI * t));
    }
    default:
      return lr;
  }
}

namespace {

// `values` as a JSON array, each number with %g's precision.
template <typename Number, typename Take>
std::string JsonArray(const std::vector<Number>& values, Take take) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppendFormat(&out, "%s%.6g", i == 0 ? "" : ", ", take(values[i]));
  }
  return out + "]";
}

// A group name as a JSON string (tensor names hold no quotes or
// backslashes in practice; escaped anyway).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

std::string AutoCompressionSummaryJson(const AutoCompressionReport& report) {
  const std::vector<AutoCompressionStep>& h = report.history;
  std::string chosen;
  std::string ratios;
  for (size_t g = 0; g < report.groups.size(); ++g) {
    const char* comma = g == 0 ? "" : ", ";
    const std::string name = JsonString(report.groups[g]);
    absl::StrAppendFormat(
        &chosen, "%s%s: %.6g", comma, name,
        h.empty() ? RungRatio(kStartRung) : h.back().ratios[g]);
    absl::StrAppend(&ratios, comma, name, ": ",
                    JsonArray(h, [g](const AutoCompressionStep& e) {
                      return e.ratios[g];
                    }));
  }
  const auto column = [&h](double AutoCompressionStep::*field) {
    return JsonArray(
        h, [field](const AutoCompressionStep& e) { return e.*field; });
  };
  return absl::StrCat(
      "{\"auto_link_bytes_per_second\": ",
      absl::StrFormat("%.6g", h.empty() ? 0.0 : h.back().link_bytes_per_second),
      ", \"auto_chosen_ratios\": {", chosen, "}, \"auto_history\": {",
      "\"steps\": ",
      JsonArray(h,
                [](const AutoCompressionStep& e) {
                  return static_cast<double>(e.step);
                }),
      ", \"link_bytes_per_second\": ",
      column(&AutoCompressionStep::link_bytes_per_second),
      ", \"budget_bytes\": ", column(&AutoCompressionStep::budget_bytes),
      ", \"chosen_bytes\": ", column(&AutoCompressionStep::chosen_bytes),
      ", \"critical\": ",
      JsonArray(
          h,
          [](const AutoCompressionStep& e) { return e.critical ? 1.0 : 0.0; }),
      ", \"ratios\": {", ratios, "}}}");
}

struct AutoCompression::Metrics {
  // Per group.
  std::vector<metrics::Gauge*> chosen_ratio;
};

absl::StatusOr<std::unique_ptr<AutoCompression>> AutoCompression::Create(
    AutoCompressionOptions options, std::vector<std::string> group_names,
    std::vector<uint64_t> group_numel, std::vector<uint32_t> chunk_group) {
  if (group_names.size() != group_numel.size()) {
    return absl::InvalidArgumentError("one name per group");
  }
  for (const uint32_t group : chunk_group) {
    if (group >= group_numel.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk of group %d of %d", group, group_numel.size()));
    }
  }
  std::vector<std::unique_ptr<const Compressor>> rungs;
  for (Rung r = 0; r < kRungCount; ++r) {
    auto made = MakeCompressor(RungCompressorOptions(r, options.base));
    if (!made.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "compressor auto, rung %s: %s", RungName(r, options.base.precision),
          made.status().message()));
    }
    rungs.push_back(*std::move(made));
  }
  auto made = std::unique_ptr<AutoCompression>(new AutoCompression(
      std::move(options), std::move(group_names), std::move(group_numel),
      std::move(chunk_group), std::move(rungs)));
  if (made->options_.registry == nullptr) return made;
  auto family = made->options_.registry->AddGaugeFamily(
      {"gradwire_worker_chosen_ratio",
       "Compressor auto: the ratio chosen for each layer group (Top-K's "
       "fraction kept; 0.5 dense 16-bit, 1 dense fp32)."});
  if (!family.ok()) return family.status();
  made->metrics_ = std::make_unique<Metrics>();
  for (size_t g = 0; g < made->report_.groups.size(); ++g) {
    metrics::Labels labels = made->options_.labels;
    labels["group"] = made->report_.groups[g];
    metrics::Gauge& gauge = (*family)->Add(labels);
    gauge.Set(RungRatio(kStartRung));
    made->metrics_->chosen_ratio.push_back(&gauge);
  }
  return made;
}

AutoCompression::AutoCompression(
    AutoCompressionOptions options, std::vector<std::string> group_names,
    std::vector<uint64_t> group_numel, std::vector<uint32_t> chunk_group,
    std::vector<std::unique_ptr<const Compressor>> rungs)
    : options_(std::move(options)),
      chunk_group_(std::move(chunk_group)),
      rung_compressors_(std::move(rungs)),
      chooser_(options_.chooser, std::move(group_numel)),
      critical_(options_.critical),
      gradient_squares_(chunk_group_.size(), 0.0),
      residual_squares_(chunk_group_.size(), 0.0),
      noted_(chunk_group_.size(), 0) {
  report_.groups = std::move(group_names);
}

AutoCompression::~AutoCompression() = default;

const Compressor& AutoCompression::CompressorFor(uint64_t key) const {
  return *rung_compressors_[chooser_.rungs()[chunk_group_[key]]];
}

void AutoCompression::NoteChunkNorms(uint64_t key, double gradient_squares,
                                     double residual_squares) {
  gradient_squares_[key] = gradient_squares;
  residual_squares_[key] = residual_squares;
  noted_[key] = 1;
}

void AutoCompression::ObserveTransfer(uint64_t bytes, double seconds) {
  link_.Observe(bytes, seconds);
}

void AutoCompression::NoteCompute(double compute_seconds,
                                  double backward_seconds) {
  compute_seconds_ = Smoothed(compute_seconds_, compute_seconds);
  backward_seconds_ = Smoothed(backward_seconds_, backward_seconds);
  const absl::Time now = absl::Now();
  // The first step's time holds the start-up (the first pull, warm
  // caches): not a step time to compare with.
  if (last_compute_note_ != absl::InfinitePast() && ++compute_notes_ > 1) {
    // The chooser judges medians of raw step times (compression_chooser.h).
    step_seconds_ = absl::ToDoubleSeconds(now - last_compute_note_);
    smoothed_step_seconds_ = Smoothed(smoothed_step_seconds_, step_seconds_);
  }
  last_compute_note_ = now;
}

void AutoCompression::NoteCpu(double compute_cpu_seconds,
                              double byte_cpu_seconds, double payload_bytes) {
  if (last_compute_cpu_ >= 0 && compute_cpu_seconds >= last_compute_cpu_) {
    cpu_compute_seconds_ =
        Smoothed(cpu_compute_seconds_, compute_cpu_seconds - last_compute_cpu_);
  }
  const double bytes = payload_bytes - last_payload_bytes_;
  const double cpu = byte_cpu_seconds - last_byte_cpu_;
  if (last_payload_bytes_ >= 0 && bytes > 0 && cpu >= 0) {
    cpu_seconds_per_byte_ = Smoothed(cpu_seconds_per_byte_, cpu / bytes);
  }
  last_compute_cpu_ = compute_cpu_seconds;
  last_byte_cpu_ = byte_cpu_seconds;
  last_payload_bytes_ = payload_bytes;
}

void AutoCompression::NoteWireRatio(double ratio) {
  if (ratio >= 1 && std::isfinite(ratio)) wire_ratio_ = ratio;
}

std::vector<GroupStatistics> AutoCompression::TakeStatistics(
    double* model_norm) {
  std::vector<GroupStatistics> groups(report_.groups.size());
  double model_squares = 0;
  bool any = false;
  for (size_t key = 0; key < chunk_group_.size(); ++key) {
    if (!noted_[key]) continue;
    GroupStatistics& group = groups[chunk_group_[key]];
    // Squares summed here, rooted below.
    group.gradient_norm += gradient_squares_[key];
    group.residual_norm += residual_squares_[key];
    model_squares += gradient_squares_[key];
    noted_[key] = 0;
    any = true;
  }
  for (GroupStatistics& group : groups) {
    group.gradient_norm = std::sqrt(group.gradient_norm);
    group.residual_norm = std::sqrt(group.residual_norm);
  }
  *model_norm = any ? std::sqrt(model_squares) : NAN;
  if (!any) groups.clear();
  return groups;
}

void AutoCompression::BeginStep(uint64_t step, double learning_rate) {
  ChooserInputs inputs;
  double model_norm = 0;
  inputs.groups = TakeStatistics(&model_norm);
  // The gradients noted are the last step's.
  if (step > 0) critical_.Observe(step - 1, model_norm, learning_rate);
  inputs.critical = critical_.critical();
  inputs.link = link_.Current();
  inputs.compute_seconds = compute_seconds_;
  inputs.backward_seconds = backward_seconds_;
  if (cpu_compute_seconds_ > 0) {
    // The wall clock can only add what communication took; the CPU
    // measure misses only the intra-op threads: the smaller is taken.
    inputs.compute_seconds = std::min(compute_seconds_, cpu_compute_seconds_);
    inputs.backward_seconds =
        std::min(backward_seconds_, cpu_compute_seconds_ * kBackwardShare);
  }
  inputs.step_seconds = step_seconds_;
  // What the step took beyond its computation, CPU-measured where known:
  // waits for pushes and pulls wherever they fall (a layer gate's wait is
  // inside the forward pass's wall time), and on cores shared with the
  // shards the CPU their bytes take from the computation.
  inputs.exposed_seconds =
      std::max(0.0, smoothed_step_seconds_ - inputs.compute_seconds);
  inputs.wire_overhead = wire_ratio_;
  inputs.cpu_seconds_per_byte = cpu_seconds_per_byte_;
  // Nothing changes before a step time is measured: the chooser's
  // reference for its first change is the starting rung's step time.
  if (step_seconds_ > 0 && chooser_.Evaluate(inputs) && metrics_) {
    for (size_t g = 0; g < metrics_->chosen_ratio.size(); ++g) {
      metrics_->chosen_ratio[g]->Set(RungRatio(chooser_.rungs()[g]));
    }
  }
  Record(step, inputs);
}

void AutoCompression::Record(uint64_t step, const ChooserInputs& inputs) {
  std::vector<AutoCompressionStep>& history = report_.history;
  if (step % record_stride_ != 0) return;
  if (history.size() >= AutoCompressionReport::kMaxHistory) {
    record_stride_ *= 2;
    // Keep the evaluations of every other recorded step: the history
    // spans the whole run, evenly.
    size_t kept = 0;
    for (AutoCompressionStep& entry : history) {
      if (entry.step % record_stride_ != 0) continue;
      if (&history[kept] != &entry) history[kept] = std::move(entry);
      ++kept;
    }
    history.resize(kept);
    if (step % record_stride_ != 0) return;
  }
  AutoCompressionStep entry;
  entry.step = step;
  entry.link_bytes_per_second =
      inputs.link ? inputs.link->bytes_per_second : 0.0;
  entry.budget_bytes = chooser_.BudgetBytes(inputs);
  entry.chosen_bytes = chooser_.PayloadBytes(chooser_.rungs());
  entry.critical = inputs.critical;
  for (const Rung rung : chooser_.rungs()) {
    entry.ratios.push_back(RungRatio(rung));
  }
  history.push_back(std::move(entry));
}

}  // namespace gradwire
