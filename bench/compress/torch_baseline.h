// The libtorch baseline of the compression benchmark. Only torch_baseline.cc
// includes libtorch headers; the rest of the benchmark sees plain types.
#ifndef GRADWIRE_BENCH_COMPRESS_TORCH_BASELINE_H_
#define GRADWIRE_BENCH_COMPRESS_TORCH_BASELINE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/common/timing.h"

namespace gradwire::bench {

// Sets libtorch's intra-op thread count to `threads` (> 0) and returns the
// count it then uses.
int SetTorchThreads(int threads);

// Times `torch::from_blob(data).abs().topk(k, /*largest=*/true,
// /*sorted=*/false)`: Top-K by magnitude, which is what our topk computes.
// abs() and topk() are timed together (abs allocates its own output each
// call, as torch code would). sorted=false because our output is in index
// order and needs no value order. (libtorch 1.13's CPU topk runs
// std::partial_sort over the whole row when 64 * k <= numel and
// nth_element otherwise, whatever `sorted` says, and one 1-D row is one
// task: only abs() uses more than one thread.) `data` is
// not modified. Requires 1 <= k <= data.size(). libtorch exceptions come back
// as INTERNAL errors.
absl::StatusOr<Timing> MeasureTorchTopK(absl::Span<const float> data,
                                        uint64_t k,
                                        const TimingOptions& options);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMPRESS_TORCH_BASELINE_H_
