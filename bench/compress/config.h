// Command-line configuration of gradwire-bench-compress (Abseil flags, run
// with --help for the list).
#ifndef GRADWIRE_BENCH_COMPRESS_CONFIG_H_
#define GRADWIRE_BENCH_COMPRESS_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/common/timing.h"

namespace gradwire::bench {

struct BenchConfig {
  // Gradient sizes in floats, each in [1, 2^31].
  std::vector<uint64_t> sizes;
  // Fractions kept by the sparsifiers and the torch::topk baseline, in (0, 1].
  std::vector<double> ratios;
  // Registered compressor names, in the order given.
  std::vector<std::string> compressors;
  TimingOptions timing;
  // Where to write JSON results; empty for none.
  std::string json_path;
  // libtorch intra-op threads; the flag's 0 becomes the hardware thread count.
  int torch_threads = 1;
  // Seed of the gaussian gradient.
  uint64_t seed = 0;
  // Every compressor row is also run on this many threads, over chunks of
  // chunk_elements floats, when it is above 1 (the flag's 0: one per core
  // of this process).
  int threads = 1;
  uint64_t chunk_elements = uint64_t{1} << 20;
  // Momentum factor of the NAME+momentum rows (worker-side momentum before
  // a ratio compressor, fused and in two passes); 0: none.
  double momentum = 0.9;
};

// Reads the flags (after absl::ParseCommandLine). Returns INVALID_ARGUMENT
// naming the flag and the bad value.
absl::StatusOr<BenchConfig> BenchConfigFromFlags();

// The Abseil names of its flags, in --help order (common/flags/program.h).
absl::Span<const absl::string_view> CompressBenchFlagNames();

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMPRESS_CONFIG_H_
