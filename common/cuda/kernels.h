// Launchers of the compression kernels (kernels.cu). Internal to
// common/cuda: DeviceCompressor (device_compressor.cc, device_dense.cc,
// device_sparse.cc) strings them together.
//
// Every launcher enqueues work on `stream` and returns the launch error
// (cudaGetLastError), never waiting. Pointers are device pointers on the
// current device; n < 2^32.
#ifndef GRADWIRE_COMMON_CUDA_KERNELS_H_
#define GRADWIRE_COMMON_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gradwire {
namespace cuda_internal {

// first_non_finite when every element was finite.
inline constexpr unsigned long long kAllFinite = ~0ull;

// Device-resident bookkeeping of one call. Init resets it.
struct Control {
  // Lowest index of a non-finite input element, or kAllFinite. Kernels that
  // write the residual do nothing when it is set, so a refused call leaves
  // the residual as it was.
  unsigned long long first_non_finite;
  // Top-K radix search: the magnitude bits (|x| as uint32) of the k-th
  // largest element fixed so far; after the search, all of them.
  unsigned int kth_key;
  // Top-K: the rank of the k-th element among those whose key shares the
  // fixed bits; after the search, how many elements equal to kth_key are
  // taken (the lowest-indexed ones).
  unsigned int ties_taken;
  // Compaction totals: elements in the "above" class, in the "tie" class,
  // and selected (above + min(ties, ties_taken)).
  unsigned int above;
  unsigned int ties;
  unsigned int selected;
};

// Which elements a compaction keeps.
enum class Rule : int {
  // Every element.
  kAll,
  // |x| >= threshold (float comparison, as the CPU threshold compressor).
  kAtLeast,
  // Top-K after RadixSelect: key > kth_key, then the first ties_taken
  // elements with key == kth_key in index order.
  kTopK,
};

// Wire precision, as common/precision.h's ValuePrecision.
enum class Precision : int { kFp32, kFp16, kBf16 };

// Elements per tile of the compaction kernels.
inline constexpr unsigned int kTileItems = 4096;
inline unsigned int TileCount(uint64_t n) {
  return static_cast<unsigned int>((n + kTileItems - 1) / kTileItems);
}
// Bins of the radix-select histogram.
inline constexpr unsigned int kHistogramBins = 256;

// Resets *control; ties_taken = k; zeroes histogram[kHistogramBins].
cudaError_t LaunchInit(Control* control, unsigned int histogram[],
                       unsigned int k, cudaStream_t stream);

// Sets control->first_non_finite to the lowest index of a NaN or infinity
// in x[0, n).
cudaError_t LaunchFindNonFinite(const float* x, uint64_t n, Control* control,
                                cudaStream_t stream);

// residual[i] += gradient[i] (non-finite gradient elements as 0 when
// zero_non_finite), unless control->first_non_finite is set.
cudaError_t LaunchAccumulate(const float* gradient, float* residual, uint64_t n,
                             bool zero_non_finite, const Control* control,
                             cudaStream_t stream);

// Finds the key (|x| bits) of the k-th largest magnitude of x[0, n) and how
// many of the elements equal to it Top-K takes; 0 < k < n, k set by
// LaunchInit. Non-finite x[i] read as 0 when `sanitize`. Four histogram
// passes of 8 (the last 7) bits each.
cudaError_t LaunchRadixSelect(const float* x, uint64_t n, bool sanitize,
                              Control* control, unsigned int histogram[],
                              cudaStream_t stream);

// Counts, per tile, the elements in the "above" (low 32 bits) and "tie"
// (high 32 bits) classes of `rule`, then scans the tiles: tile_counts[t]
// becomes the counts before tile t and the control totals are set.
cudaError_t LaunchCountSelected(const float* x, uint64_t n, bool sanitize,
                                Rule rule, float threshold, Control* control,
                                unsigned long long tile_counts[],
                                cudaStream_t stream);

// Writes the selected elements in index order: indices[j], and values[j] =
// x rounded to `precision`. With a residual (which is then x itself), also
// residual[i] -= values[j] at each selected i, unless first_non_finite is
// set. Needs LaunchCountSelected's tile_counts.
cudaError_t LaunchScatterSelected(const float* x, float* residual, uint64_t n,
                                  bool sanitize, Rule rule, float threshold,
                                  Precision precision, const Control* control,
                                  const unsigned long long tile_counts[],
                                  uint32_t indices[], float values[],
                                  cudaStream_t stream);

// values[j] = x[indices[j]] rounded to `precision`, j < k; with a residual
// (x itself) also residual[indices[j]] -= values[j], unless
// first_non_finite is set. Indices distinct.
cudaError_t LaunchGather(const float* x, float* residual, bool sanitize,
                         const uint32_t indices[], uint64_t k,
                         Precision precision, const Control* control,
                         float values[], cudaStream_t stream);

// Dense rounding of every element. Without error feedback (residual null):
// c = round(input[i]). With it: v = residual[i] + input[i], c = round(v),
// residual[i] = v - c (skipped when first_non_finite is set). Non-finite
// input elements (and, with feedback, non-finite v) read as 0 when
// zero_non_finite. Writes c into out as floats (fp32) or as 16-bit
// patterns (fp16, bf16).
cudaError_t LaunchDense(const float* input, float* residual, uint64_t n,
                        bool zero_non_finite, Precision precision,
                        const Control* control, void* out, cudaStream_t stream);

// Round-trips each element of x through the device's precision conversion
// (the same code the kernels use): out16[i] = the 16-bit pattern, out[i] =
// its value. For tests.
cudaError_t LaunchRoundTrip(const float* x, uint64_t n, Precision precision,
                            uint16_t out16[], float out[], cudaStream_t stream);

}  // namespace cuda_internal
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CUDA_KERNELS_H_
