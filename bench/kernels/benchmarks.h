// The families of benchmarks of gradwire-bench-kernels. Each Register*
// adds its benchmarks to Google Benchmark's list; call them before
// benchmark::Initialize, once each.
#ifndef GRADWIRE_BENCH_KERNELS_BENCHMARKS_H_
#define GRADWIRE_BENCH_KERNELS_BENCHMARKS_H_

#include <string>

#include "common/compress/kernels.h"

namespace gradwire::bench {

// Every compression kernel of `kernels` (common/compress/kernels.h), named
// kernel/<loop>/<isa>. `kernels` must outlive the benchmarks' run.
void RegisterKernelLoops(const std::string& isa,
                         const compress_kernels::KernelTable* kernels);

// The wire codec (common/codec/codec.h): Top-K 1% and dense chunks in fp16
// and fp32, encoded and decoded with validation (codec/...).
void RegisterCodec();

// A shard's pull delta, Top-K 1% of its weights against their shadow, with
// the difference materialised and fused (publish/...).
void RegisterPublish();

// Whole compressors on one chunk: DGC 1% with momentum correction and error
// feedback (compressor/...).
void RegisterCompressors();

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_KERNELS_BENCHMARKS_H_
