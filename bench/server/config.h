// Command-line configuration of gradwire-bench-server (Abseil flags, run with
// --help for the list).
#ifndef GRADWIRE_BENCH_SERVER_CONFIG_H_
#define GRADWIRE_BENCH_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/common/timing.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

// How pushes reach the shard (the tcp bound always runs).
enum class PushPath { kInProcess, kGrpc };

struct ServerBenchConfig {
  // Model size in float32 parameters (one tensor), >= 1.
  uint64_t numel = 25'000'000;
  // Largest chunk in bytes (the partition's partition_bytes).
  uint64_t partition_bytes = uint64_t{4} << 20;
  // Chunks per push request, in key order (the last request of a round may
  // carry fewer); 0 puts all of the shard's chunks in one request.
  uint32_t chunks_per_push = 1;
  // The compressor of every push (a registry name; fp16 values where it has
  // a precision).
  std::string compressor = "topk";
  // Fraction of each chunk a sparsifier's push carries, in (0, 1].
  double density = 0.01;
  // Concurrent pusher counts to measure, each >= 1, in the order given.
  std::vector<uint32_t> pushers;
  // Consistency modes of the shard (ASP and/or BSP), in the order given.
  std::vector<v1::ConsistencyMode> modes;
  // Push paths to measure, in the order given.
  std::vector<PushPath> paths;
  // Rounds per timed call: in each round every pusher pushes every chunk
  // once, at a fresh step.
  int rounds = 4;
  // Warm-up call, then at least min_reps timed calls (see
  // bench/common/timing.h).
  TimingOptions timing;
  // Where to write JSON results; empty for none.
  std::string json_path;
  // Seed of the pushed gradients.
  uint64_t seed = 0;
  // The shard's ShardOptions::apply_threads (-1: one less than the usable
  // cores; 0: every chunk of a push on the calling thread).
  int apply_threads = -1;
};

// Reads the flags (after absl::ParseCommandLine). Returns INVALID_ARGUMENT
// naming the flag and the bad value.
absl::StatusOr<ServerBenchConfig> ServerBenchConfigFromFlags();

// The Abseil names of its flags, in --help order (common/flags/program.h).
absl::Span<const absl::string_view> ServerBenchFlagNames();

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_CONFIG_H_
