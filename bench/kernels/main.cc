// gradwire-bench-kernels: one Google Benchmark per inner loop of the hot
// paths, on 1M floats (4 MiB, one chunk at the default partition size):
//   - every compression kernel (common/compress/kernels.h) in every
//     instruction set this CPU and build have (portable, avx2, avx512);
//   - the wire codec: a Top-K 1% chunk (10,486 of 1M, fp16 values, gap
//     varint indices) and a dense fp16 chunk, encoded and decoded with
//     validation (common/codec/codec.h), as a shard decodes every push;
//   - a shard's pull delta, Top-K 1% of its weights against their shadow,
//     with the difference materialised and fused (publish/...);
//   - DGC 1% with its momentum correction (m = 0.9) and error feedback, the
//     whole compressor on one chunk (compressor/...).
// bytes_per_second counts the floats the loop reads (4 bytes each) for the
// kernels and the encoded bytes for the codec; compare rows of one run.
//
//   build/bin/gradwire-bench-kernels [--benchmark_filter=REGEX]
//       [--benchmark_format=json] [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <string>

#include "bench/kernels/benchmarks.h"
#include "common/compress/kernels.h"

int main(int argc, char** argv) {
  using gradwire::compress_kernels::InstructionSet;
  using gradwire::compress_kernels::InstructionSetName;
  using gradwire::compress_kernels::KernelsFor;
  for (InstructionSet isa : {InstructionSet::kPortable, InstructionSet::kAvx2,
                             InstructionSet::kAvx512}) {
    const auto table = KernelsFor(isa);
    if (table.has_value()) {
      gradwire::bench::RegisterKernelLoops(std::string(InstructionSetName(isa)),
                                           *table);
    }
  }
  gradwire::bench::RegisterCodec();
  gradwire::bench::RegisterPublish();
  gradwire::bench::RegisterCompressors();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
