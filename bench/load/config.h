// Command-line configuration of gradwire-bench-load (Abseil flags; --help
// lists them). Every flag also reads GRADWIRE_<NAME> from the environment
// (common/command_line.h); --server-arg and --compare-server-arg may be
// repeated on the command line, and their variables hold comma-separated
// lists.
#ifndef GRADWIRE_BENCH_LOAD_CONFIG_H_
#define GRADWIRE_BENCH_LOAD_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/precision.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

struct LoadBenchConfig {
  // Simulated workers (one thread, one channel per shard, each) and real
  // shard processes.
  uint32_t workers = 64;
  uint32_t shards = 2;
  // Model: one tensor of `params` floats cut into chunks of at most
  // `partition_bytes`, placed on the shards by the project's partition.
  uint64_t params = 262'144;
  uint64_t partition_bytes = uint64_t{128} << 10;
  // Pushes: Top-K at `density` with error feedback, values at
  // `push_precision`; each worker cycles through `distinct_gradients`
  // gradients built before the timed run.
  double density = 0.01;
  ValuePrecision push_precision = ValuePrecision::kFp16;
  int distinct_gradients = 4;
  // Consistency mode of the job and, for SSP, its staleness.
  v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_ASP;
  uint32_t staleness = 2;
  // The shards' optimizer: "sgd" (what they run beside worker momentum),
  // "adam" (Adam on the shards: every ASP push runs the dense rule) or
  // "1bit-adam" (Adam whose second moment freezes after each chunk's first
  // update, so later sparse pushes take the selected-elements path).
  std::string optimizer = "sgd";
  // Pulls: compressed deltas (Top-K at `pull_ratio`, 0 meaning `density`,
  // with fp16 values) where the shard can give one, as the real worker asks
  // by default; or dense fp32 every time.
  bool delta_pulls = true;
  double pull_ratio = 0;
  // Steps of each of the two measured phases (the memory check compares the
  // shards' RSS after `steps` and after 2 * `steps`).
  uint64_t steps = 100;
  // Deadline of every RPC.
  absl::Duration rpc_timeout = absl::Seconds(60);
  // The gradwire-server binary; empty: the one next to this binary.
  std::string server_binary;
  // Extra flags for every shard, and those of the compared run.
  std::vector<std::string> server_args;
  std::vector<std::string> compare_server_args;
  // When set, shard i of a run checkpoints into <root>/[<run>/]shard-<i>.
  std::string checkpoint_root;
  std::string json_path;
  // The memory verdict fails when a shard's RSS grows between the two
  // phases by more than max(max_rss_growth_mib, max_rss_growth_percent % of
  // its RSS after the first phase). glibc keeps freed message buffers
  // around: with no trend, two quiescent readings of a shard differ by a
  // sizeable share of its RSS
  // (docs/benchmarks/load.md#why-the-memory-limit-is-relative), hence the
  // relative part.
  double max_rss_growth_mib = 8.0;
  double max_rss_growth_percent = 25.0;
  uint64_t seed = 42;
  bool dry_run = false;
};

// Abseil names of the flags, for --help, the environment and --dry-run.
absl::Span<const absl::string_view> LoadBenchFlagNames();

// Moves every "--server-arg=X", "--server-arg X" (and the compare variant)
// out of argv, in order, into the returned lists; argc and argv are
// rewritten without them. Call after NormalizeFlagNames (names with '_').
// INVALID_ARGUMENT for a trailing name without a value.
struct RepeatedServerArgs {
  std::vector<std::string> server_args;
  std::vector<std::string> compare_server_args;
};
absl::StatusOr<RepeatedServerArgs> ExtractRepeatedServerArgs(int* argc,
                                                             char** argv);

// Reads the flags (after absl::ParseCommandLine); lists from `repeated`
// win over the flags' values (which come from the environment). Returns
// INVALID_ARGUMENT naming the flag and the bad value.
absl::StatusOr<LoadBenchConfig> LoadBenchConfigFromFlags(
    const RepeatedServerArgs& repeated);

// "asp", "bsp" or "ssp".
absl::string_view ModeName(v1::ConsistencyMode mode);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_CONFIG_H_
