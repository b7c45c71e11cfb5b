#include "bench/server/config.h"

#include <algorithm>
#include <cmath>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/compress/registry.h"

ABSL_FLAG(bool, quick, false,
          "CI smoke run: 2.5M parameters, 1 round, timed calls for 0.1 s per "
          "measurement (at least 1) (overrides --numel, --rounds, --min_reps "
          "and --seconds_per_measurement)");
ABSL_FLAG(uint64_t, numel, 25'000'000,
          "model size in float32 parameters, cut into chunks of "
          "--partition_bytes");
ABSL_FLAG(uint64_t, partition_bytes, uint64_t{4} << 20,
          "largest chunk in bytes of float32 (a positive multiple of 4)");
ABSL_FLAG(uint32_t, chunks_per_push, 1,
          "chunks each push request carries, in key order (0: all of the "
          "shard's chunks in one request, as a worker that pushes a whole "
          "step at once does); the tcp bound sends the same requests");
ABSL_FLAG(std::string, compressor, "topk",
          "what each push carries, with fp16 values where the compressor "
          "has a precision: topk (at --density), none (dense fp32), fp16 "
          "or bf16 (dense), or any other compressor name gradwire knows");
ABSL_FLAG(double, density, 0.01,
          "fraction of each chunk's elements a sparsifier's push carries, in "
          "(0, 1]; ignored by dense compressors");
ABSL_FLAG(std::string, pushers, "1,2,8",
          "comma-separated numbers of concurrent pushers (one worker id and "
          "one thread each)");
ABSL_FLAG(std::string, modes, "asp,bsp",
          "comma-separated consistency modes of the shard: asp (every push "
          "updates at once: aggregation throughput) and/or bsp (pushers push "
          "the same step and meet at a barrier after each round)");
ABSL_FLAG(std::string, paths, "in_process,grpc",
          "comma-separated push paths: in_process (Shard::Push called "
          "directly) and/or grpc (loopback gRPC); the tcp bound always runs");
ABSL_FLAG(int, rounds, 4,
          "rounds per timed call; in a round every pusher pushes every chunk "
          "once, at a fresh step");
ABSL_FLAG(int, min_reps, 5, "timed calls per measurement, at least (>= 1)");
ABSL_FLAG(double, seconds_per_measurement, 0.5,
          "after min_reps, keep repeating a measurement until its timed calls "
          "add up to this many seconds");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file");
ABSL_FLAG(uint64_t, seed, 42, "seed of the pushed gradients");
ABSL_FLAG(int, apply_threads, -1,
          "the shard's threads besides a Push's own that update the chunks "
          "of one push (the server's --apply-threads): -1 one less than the "
          "usable cores, 0 none");

namespace gradwire::bench {

namespace {

// Every flag of this benchmark, in --help order.
constexpr absl::string_view kFlagNames[] = {
    "quick",      "numel",   "partition_bytes", "chunks_per_push",
    "compressor", "density", "pushers",         "modes",
    "paths",      "rounds",  "min_reps",        "seconds_per_measurement",
    "json",       "seed",    "apply_threads"};

constexpr uint64_t kQuickNumel = 2'500'000;
// Enough repetitions for the sub-millisecond tcp rows of --quick.
constexpr double kQuickSeconds = 0.1;
// Chunk element counts travel as uint32; the codec caps numel at 2^31.
constexpr uint64_t kMaxPartitionBytes = uint64_t{4} << 30;

absl::Status ParsePushers(const std::string& list, ServerBenchConfig* config) {
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    uint32_t pushers = 0;
    if (!absl::SimpleAtoi(item, &pushers) || pushers < 1 || pushers > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pushers: '", item, "' is not a whole number in [1, 256]"));
    }
    config->pushers.push_back(pushers);
  }
  if (config->pushers.empty()) {
    return absl::InvalidArgumentError("--pushers: no count given");
  }
  return absl::OkStatus();
}

absl::Status ParseModes(const std::string& list, ServerBenchConfig* config) {
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const std::string name = absl::AsciiStrToLower(item);
    if (name == "asp") {
      config->modes.push_back(v1::CONSISTENCY_MODE_ASP);
    } else if (name == "bsp") {
      config->modes.push_back(v1::CONSISTENCY_MODE_BSP);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--modes: '", item, "' is not asp or bsp"));
    }
  }
  if (config->modes.empty()) {
    return absl::InvalidArgumentError("--modes: no mode given");
  }
  return absl::OkStatus();
}

absl::Status ParsePaths(const std::string& list, ServerBenchConfig* config) {
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const std::string name = absl::AsciiStrToLower(item);
    if (name == "in_process") {
      config->paths.push_back(PushPath::kInProcess);
    } else if (name == "grpc") {
      config->paths.push_back(PushPath::kGrpc);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--paths: '", item, "' is not in_process or grpc"));
    }
  }
  if (config->paths.empty()) {
    return absl::InvalidArgumentError("--paths: no path given");
  }
  return absl::OkStatus();
}

absl::Status ParseSizes(bool quick, ServerBenchConfig* config) {
  config->numel = quick ? kQuickNumel : absl::GetFlag(FLAGS_numel);
  if (config->numel < 1 || config->numel > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--numel: ", config->numel, " is not in [1, 2^30]"));
  }
  config->partition_bytes = absl::GetFlag(FLAGS_partition_bytes);
  if (config->partition_bytes == 0 || config->partition_bytes % 4 != 0 ||
      config->partition_bytes >= kMaxPartitionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--partition_bytes: ", config->partition_bytes,
                     " is not a positive multiple of 4 below 4 GiB"));
  }
  config->chunks_per_push = absl::GetFlag(FLAGS_chunks_per_push);
  config->compressor = absl::GetFlag(FLAGS_compressor);
  const std::vector<std::string> names = CompressorNames();
  if (std::find(names.begin(), names.end(), config->compressor) ==
      names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compressor: '", config->compressor, "' is not one of ",
                     absl::StrJoin(names, ", ")));
  }
  config->density = absl::GetFlag(FLAGS_density);
  if (!(config->density > 0 && config->density <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--density: ", config->density, " is not a number in (0, 1]"));
  }
  return absl::OkStatus();
}

absl::Status ParseTiming(bool quick, ServerBenchConfig* config) {
  config->rounds = quick ? 1 : absl::GetFlag(FLAGS_rounds);
  config->timing.min_reps = quick ? 1 : absl::GetFlag(FLAGS_min_reps);
  config->timing.max_seconds =
      quick ? kQuickSeconds : absl::GetFlag(FLAGS_seconds_per_measurement);
  if (config->rounds < 1 || config->rounds > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rounds: ", config->rounds, " is not in [1, 10000]"));
  }
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerBenchConfig> ServerBenchConfigFromFlags() {
  ServerBenchConfig config;
  const bool quick = absl::GetFlag(FLAGS_quick);
  absl::Status s = ParseSizes(quick, &config);
  if (s.ok()) s = ParsePushers(absl::GetFlag(FLAGS_pushers), &config);
  if (s.ok()) s = ParseModes(absl::GetFlag(FLAGS_modes), &config);
  if (s.ok()) s = ParsePaths(absl::GetFlag(FLAGS_paths), &config);
  if (s.ok()) s = ParseTiming(quick, &config);
  if (!s.ok()) return s;
  config.json_path = absl::GetFlag(FLAGS_json);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.apply_threads = absl::GetFlag(FLAGS_apply_threads);
  if (config.apply_threads < -1 || config.apply_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--apply_threads=", config.apply_threads,
                     " is not -1 or in [0, 1024]"));
  }
  return config;
}

absl::Span<const absl::string_view> ServerBenchFlagNames() {
  return kFlagNames;
}

}  // namespace gradwire::bench
