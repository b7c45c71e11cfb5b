#include "bench/compress/config.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/compress/registry.h"
#include "common/usable_cpus.h"

ABSL_FLAG(bool, quick, false,
          "CI smoke run: only 1M floats and at most 0.25 s per measurement "
          "(overrides --sizes and caps --seconds_per_measurement)");
ABSL_FLAG(std::string, sizes, "1M,25M",
          "comma-separated gradient sizes in floats; suffixes K (1e3) and M "
          "(1e6) allowed");
ABSL_FLAG(std::string, ratios, "0.01,0.001",
          "comma-separated fractions in (0, 1] kept by the sparsifiers (topk, "
          "randomk, dgc, threshold) and by the torch::topk baseline");
ABSL_FLAG(std::string, compressors, "",
          "comma-separated compressor names to run; empty runs every "
          "registered one. The torch_topk and memcpy baselines always run");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file");
ABSL_FLAG(int, min_reps, 3, "timed calls per measurement, at least (>= 1)");
ABSL_FLAG(double, seconds_per_measurement, 1.0,
          "after min_reps, keep repeating a measurement until its timed calls "
          "add up to this many seconds");
ABSL_FLAG(int, torch_threads, 0,
          "intra-op threads of the torch::topk baseline; 0: one per CPU this "
          "process may use (its affinity mask and cgroup CPU quota)");
ABSL_FLAG(uint64_t, seed, 42, "seed of the gaussian gradient");
ABSL_FLAG(int, threads, 0,
          "also run every compressor over chunks on this many threads, as a "
          "worker compresses a push (0: one per core of this process; 1: "
          "no multi-threaded rows); sizes above --chunk-elements also get a "
          "row of the chunks on one thread");
ABSL_FLAG(double, momentum, 0.9,
          "also time each ratio compressor after the worker's momentum step "
          "(this factor, in [0, 1)), in one pass (NAME+momentum) and as two "
          "(NAME+momentum/2pass); 0: no such rows");
ABSL_FLAG(uint64_t, chunk_elements, uint64_t{1} << 20,
          "floats per chunk of the chunked rows (the worker's default "
          "--partition-bytes is 4 MiB: 1M floats)");

namespace gradwire::bench {

namespace {

// Every flag of this benchmark, in --help order.
constexpr absl::string_view kFlagNames[] = {"quick",
                                            "sizes",
                                            "ratios",
                                            "compressors",
                                            "json",
                                            "min_reps",
                                            "seconds_per_measurement",
                                            "torch_threads",
                                            "seed",
                                            "threads",
                                            "chunk_elements",
                                            "momentum"};

// Indices travel as uint32 and the decoder's default bound is 2^31.
constexpr double kMaxNumel = 2147483648.0;

std::vector<std::string> SplitList(const std::string& list) {
  return absl::StrSplit(list, ',', absl::SkipWhitespace());
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view number_text = absl::StripAsciiWhitespace(text);
  double scale = 1;
  if (absl::ConsumeSuffix(&number_text, "K") ||
      absl::ConsumeSuffix(&number_text, "k")) {
    scale = 1e3;
  } else if (absl::ConsumeSuffix(&number_text, "M")) {
    scale = 1e6;
  }
  double number = 0;
  const bool parsed = absl::SimpleAtod(number_text, &number);
  const double numel = number * scale;
  if (!parsed || !(numel >= 1 && numel <= kMaxNumel) ||
      numel != std::floor(numel)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sizes: '", text, "' is not a whole number of floats in [1, 2^31]"));
  }
  return static_cast<uint64_t>(numel);
}

absl::Status ParseSizes(const std::string& list, BenchConfig* config) {
  for (const std::string& item : SplitList(list)) {
    absl::StatusOr<uint64_t> size = ParseSize(item);
    if (!size.ok()) return size.status();
    config->sizes.push_back(*size);
  }
  if (config->sizes.empty()) {
    return absl::InvalidArgumentError("--sizes: no size given");
  }
  return absl::OkStatus();
}

absl::Status ParseRatios(const std::string& list, BenchConfig* config) {
  for (const std::string& item : SplitList(list)) {
    double ratio = 0;
    if (!absl::SimpleAtod(item, &ratio) || !(ratio > 0 && ratio <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ratios: '", item, "' is not a number in (0, 1]"));
    }
    config->ratios.push_back(ratio);
  }
  if (config->ratios.empty()) {
    return absl::InvalidArgumentError("--ratios: no ratio given");
  }
  return absl::OkStatus();
}

absl::Status ParseCompressors(const std::string& list, BenchConfig* config) {
  const std::vector<std::string> known = CompressorNames();
  config->compressors = SplitList(list);
  if (config->compressors.empty()) config->compressors = known;
  for (const std::string& name : config->compressors) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compressors: unknown compressor '", name,
                       "'; known: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTiming(bool quick, BenchConfig* config) {
  config->timing.min_reps = absl::GetFlag(FLAGS_min_reps);
  config->timing.max_seconds = absl::GetFlag(FLAGS_seconds_per_measurement);
  if (config->timing.min_reps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_reps: ", config->timing.min_reps, " is not >= 1"));
  }
  if (!(config->timing.max_seconds >= 0 &&
        std::isfinite(config->timing.max_seconds))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seconds_per_measurement: ", config->timing.max_seconds,
                     " is not a finite number >= 0"));
  }
  config->torch_threads = absl::GetFlag(FLAGS_torch_threads);
  if (config->torch_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--torch_threads: ", config->torch_threads, " is negative"));
  }
  if (config->torch_threads == 0) {
    config->torch_threads = UsableCpus();
  }
  if (quick) {
    config->timing.max_seconds = std::min(config->timing.max_seconds, 0.25);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchConfig> BenchConfigFromFlags() {
  BenchConfig config;
  const bool quick = absl::GetFlag(FLAGS_quick);
  absl::Status s =
      ParseSizes(quick ? "1M" : absl::GetFlag(FLAGS_sizes), &config);
  if (s.ok()) s = ParseRatios(absl::GetFlag(FLAGS_ratios), &config);
  if (s.ok()) s = ParseCompressors(absl::GetFlag(FLAGS_compressors), &config);
  if (s.ok()) s = ParseTiming(quick, &config);
  if (!s.ok()) return s;
  config.json_path = absl::GetFlag(FLAGS_json);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.threads = absl::GetFlag(FLAGS_threads);
  if (config.threads < 0 || config.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: ", config.threads, " is outside [0, 1024]"));
  }
  if (config.threads == 0) config.threads = UsableCpus();
  config.chunk_elements = absl::GetFlag(FLAGS_chunk_elements);
  if (config.chunk_elements < 1 || config.chunk_elements > kMaxNumel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--chunk_elements: ", config.chunk_elements, " is outside [1, 2^31]"));
  }
  config.momentum = absl::GetFlag(FLAGS_momentum);
  if (!(config.momentum >= 0.0 && config.momentum < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--momentum: ", config.momentum, " is outside [0, 1)"));
  }
  return config;
}

absl::Span<const absl::string_view> CompressBenchFlagNames() {
  return kFlagNames;
}

}  // namespace gradwire::bench
