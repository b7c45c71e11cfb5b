// The compression kernels; see kernels.h for what each launcher does.
//
// Top-K is exact and selects the same set as the CPU compressor
// (common/compress/select.cc): larger magnitude first, ties to the lower
// index. A radix search over the magnitude bits finds the k-th largest key
// and how many elements equal to it are taken; one ordered compaction then
// writes the selected elements in increasing index order. Block-level CUB
// primitives only, to keep the compile short.
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda/device_precision.cuh"
#include "common/cuda/kernels.h"

namespace gradwire {
namespace cuda_internal {
namespace {

constexpr unsigned int kThreads = 256;
constexpr unsigned int kItems = kTileItems / kThreads;
constexpr unsigned int kScanThreads = 1024;
// Grid-stride kernels use at most this many blocks (a few per SM).
constexpr uint64_t kMaxBlocks = 2048;

static_assert(kItems * kThreads == kTileItems, "tile shape");
static_assert(kHistogramBins == kThreads, "one histogram bin per thread");

// Compaction classes, counted as (ties << 32) + above in one 64-bit sum.
enum Class : int { kNone, kAbove, kTie };

__device__ __forceinline__ unsigned long long ClassCount(int c) {
  return c == kAbove ? 1ull : c == kTie ? (1ull << 32) : 0ull;
}

__device__ __forceinline__ float Sanitize(float x, bool sanitize) {
  return (sanitize && !isfinite(x)) ? 0.0f : x;
}

// |x| as an integer: ordered like the magnitudes of non-NaN floats.
__device__ __forceinline__ uint32_t KeyOf(float x) {
  return __float_as_uint(x) & 0x7fffffffu;
}

__device__ __forceinline__ int Classify(float x, Rule rule, float threshold,
                                        uint32_t kth_key) {
  switch (rule) {
    case Rule::kAll:
      return kAbove;
    case Rule::kAtLeast:
      return fabsf(x) >= threshold ? kAbove : kNone;
    case Rule::kTopK:
      break;
  }
  const uint32_t key = KeyOf(x);
  return key > kth_key ? kAbove : key == kth_key ? kTie : kNone;
}

__device__ __forceinline__ bool Refused(const Control* control) {
  return control->first_non_finite != kAllFinite;
}

unsigned int GridFor(uint64_t n) {
  const uint64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 1            ? 1
                                   : blocks > kMaxBlocks ? kMaxBlocks
                                                         : blocks);
}

#define GRADWIRE_GRID_STRIDE(i, n)                                          \
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; \
       i += uint64_t{gridDim.x} * blockDim.x)

__global__ void InitKernel(Control* control, unsigned int* histogram,
                           unsigned int k) {
  if (threadIdx.x == 0) {
    control->first_non_finite = kAllFinite;
    control->kth_key = 0;
    control->ties_taken = k;
    control->above = 0;
    control->ties = 0;
    control->selected = 0;
  }
  histogram[threadIdx.x] = 0;
}

__global__ void FindNonFiniteKernel(const float* x, uint64_t n,
                                    Control* control) {
  GRADWIRE_GRID_STRIDE(i, n) {
    if (!isfinite(x[i])) atomicMin(&control->first_non_finite, i);
  }
}

__global__ void AccumulateKernel(const float* gradient, float* residual,
                                 uint64_t n, bool zero_non_finite,
                                 const Control* control) {
  if (Refused(control)) return;
  GRADWIRE_GRID_STRIDE(i, n) {
    residual[i] += Sanitize(gradient[i], zero_non_finite);
  }
}

// Counts the keys whose bits above shift + bits equal those fixed so far,
// by their `bits` bits from `shift` up.
__global__ void HistogramKernel(const float* x, uint64_t n, bool sanitize,
                                const Control* control, unsigned int* histogram,
                                int shift, int bits) {
  __shared__ unsigned int local[kHistogramBins];
  local[threadIdx.x] = 0;
  __syncthreads();
  const int high = shift + bits;
  const uint32_t want = control->kth_key >> high;
  const uint32_t mask = (1u << bits) - 1;
  GRADWIRE_GRID_STRIDE(i, n) {
    const uint32_t key = KeyOf(Sanitize(x[i], sanitize));
    if ((key >> high) == want) atomicAdd(&local[(key >> shift) & mask], 1u);
  }
  __syncthreads();
  if (local[threadIdx.x] != 0) {
    atomicAdd(&histogram[threadIdx.x], local[threadIdx.x]);
  }
}

// Fixes the next digit of the k-th key: the bin, counted from the largest,
// in which the wanted rank falls. Clears the histogram for the next pass.
__global__ void PickDigitKernel(Control* control, unsigned int* histogram,
                                int shift) {
  using Scan = cub::BlockScan<unsigned int, kHistogramBins>;
  __shared__ typename Scan::TempStorage temp;
  const unsigned int bin = kHistogramBins - 1 - threadIdx.x;
  const unsigned int count = histogram[bin];
  histogram[bin] = 0;
  const unsigned int rank = control->ties_taken;
  unsigned int inclusive;
  Scan(temp).InclusiveSum(count, inclusive);
  __syncthreads();  // Every thread has read `rank` before it changes.
  const unsigned int exclusive = inclusive - count;
  if (exclusive < rank && rank <= inclusive) {
    control->kth_key |= bin << shift;
    control->ties_taken = rank - exclusive;
  }
}

__global__ void CountTilesKernel(const float* x, uint64_t n, bool sanitize,
                                 Rule rule, float threshold,
                                 const Control* control,
                                 unsigned long long* tile_counts) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const uint64_t base = uint64_t{blockIdx.x} * kTileItems;
  const uint32_t kth_key = control->kth_key;
  unsigned long long count = 0;
  for (unsigned int j = 0; j < kItems; ++j) {
    const uint64_t i = base + j * kThreads + threadIdx.x;
    if (i < n) {
      count += ClassCount(
          Classify(Sanitize(x[i], sanitize), rule, threshold, kth_key));
    }
  }
  const unsigned long long total = Reduce(temp).Sum(count);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// Exclusive scan of the tile counts in place, and the totals.
__global__ void ScanTilesKernel(unsigned long long* tile_counts,
                                unsigned int tiles, Control* control) {
  using Scan = cub::BlockScan<unsigned long long, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  unsigned long long carry = 0;
  for (unsigned int start = 0; start < tiles; start += kScanThreads) {
    const unsigned int t = start + threadIdx.x;
    const unsigned long long count = t < tiles ? tile_counts[t] : 0;
    unsigned long long before, total;
    Scan(temp).ExclusiveSum(count, before, total);
    if (t < tiles) tile_counts[t] = carry + before;
    carry += total;
    __syncthreads();  // `temp` is reused.
  }
  if (threadIdx.x == 0) {
    const auto above = static_cast<unsigned int>(carry);
    const auto ties = static_cast<unsigned int>(carry >> 32);
    control->above = above;
    control->ties = ties;
    control->selected = above + min(ties, control->ties_taken);
  }
}

__global__ void ScatterKernel(const float* x, float* residual, uint64_t n,
                              bool sanitize, Rule rule, float threshold,
                              Precision precision, const Control* control,
                              const unsigned long long* tile_counts,
                              uint32_t* indices, float* values) {
  if (residual != nullptr && Refused(control)) return;
  using Load =
      cub::BlockLoad<float, kThreads, kItems, cub::BLOCK_LOAD_TRANSPOSE>;
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } temp;
  const uint64_t base = uint64_t{blockIdx.x} * kTileItems;
  const uint64_t left = n - base;
  const int valid = static_cast<int>(left < kTileItems ? left : kTileItems);
  // Blocked arrangement: thread t holds elements base + t * kItems + j, so
  // a scan over threads numbers the selected elements in index order.
  float items[kItems];
  Load(temp.load).Load(x + base, items, valid, 0.0f);
  __syncthreads();  // `temp` is reused.
  const uint32_t kth_key = control->kth_key;
  const unsigned int ties_taken = control->ties_taken;
  int classes[kItems];
  unsigned long long mine = 0;
  for (unsigned int j = 0; j < kItems; ++j) {
    items[j] = Sanitize(items[j], sanitize);
    const bool inside = threadIdx.x * kItems + j < static_cast<unsigned>(valid);
    classes[j] = inside ? Classify(items[j], rule, threshold, kth_key) : kNone;
    mine += ClassCount(classes[j]);
  }
  unsigned long long before;
  Scan(temp.scan).ExclusiveSum(mine, before);
  before += tile_counts[blockIdx.x];
  auto above = static_cast<unsigned int>(before);
  auto ties = static_cast<unsigned int>(before >> 32);
  for (unsigned int j = 0; j < kItems; ++j) {
    unsigned int position;
    if (classes[j] == kAbove) {
      position = above + min(ties, ties_taken);
      ++above;
    } else if (classes[j] == kTie && ties < ties_taken) {
      position = above + ties;
      ++ties;
    } else {
      ties += classes[j] == kTie;
      continue;
    }
    const uint64_t i = base + threadIdx.x * kItems + j;
    const float value = RoundToPrecision(items[j], precision);
    indices[position] = static_cast<uint32_t>(i);
    values[position] = value;
    if (residual != nullptr) residual[i] = items[j] - value;
  }
}

__global__ void GatherKernel(const float* x, float* residual, bool sanitize,
                             const uint32_t* indices, uint64_t k,
                             Precision precision, const Control* control,
                             float* values) {
  if (residual != nullptr && Refused(control)) return;
  GRADWIRE_GRID_STRIDE(j, k) {
    const uint32_t i = indices[j];
    const float v = Sanitize(x[i], sanitize);
    const float value = RoundToPrecision(v, precision);
    values[j] = value;
    if (residual != nullptr) residual[i] = v - value;
  }
}

__global__ void DenseKernel(const float* input, float* residual, uint64_t n,
                            bool zero_non_finite, Precision precision,
                            const Control* control, void* out) {
  if (residual != nullptr && Refused(control)) return;
  GRADWIRE_GRID_STRIDE(i, n) {
    float v = Sanitize(input[i], zero_non_finite);
    if (residual != nullptr) v = residual[i] + v;
    const float sent = residual != nullptr ? Sanitize(v, zero_non_finite) : v;
    float value;
    if (precision == Precision::kFp32) {
      value = sent;
      static_cast<float*>(out)[i] = value;
    } else {
      const uint16_t bits = ToBits16(sent, precision);
      value = FromBits16(bits, precision);
      static_cast<uint16_t*>(out)[i] = bits;
    }
    if (residual != nullptr) residual[i] = v - value;
  }
}

__global__ void RoundTripKernel(const float* x, uint64_t n, Precision precision,
                                uint16_t* out16, float* out) {
  GRADWIRE_GRID_STRIDE(i, n) {
    const uint16_t bits = ToBits16(x[i], precision);
    out16[i] = bits;
    out[i] = FromBits16(bits, precision);
  }
}

#undef GRADWIRE_GRID_STRIDE

}  // namespace

cudaError_t LaunchInit(Control* control, unsigned int histogram[],
                       unsigned int k, cudaStream_t stream) {
  InitKernel<<<1, kHistogramBins, 0, stream>>>(control, histogram, k);
  return cudaGetLastError();
}

cudaError_t LaunchFindNonFinite(const float* x, uint64_t n, Control* control,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FindNonFiniteKernel<<<GridFor(n), kThreads, 0, stream>>>(x, n, control);
  return cudaGetLastError();
}

cudaError_t LaunchAccumulate(const float* gradient, float* residual, uint64_t n,
                             bool zero_non_finite, const Control* control,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AccumulateKernel<<<GridFor(n), kThreads, 0, stream>>>(
      gradient, residual, n, zero_non_finite, control);
  return cudaGetLastError();
}

cudaError_t LaunchRadixSelect(const float* x, uint64_t n, bool sanitize,
                              Control* control, unsigned int histogram[],
                              cudaStream_t stream) {
  // 31 key bits, most significant digit first.
  constexpr int kPasses[][2] = {{23, 8}, {15, 8}, {7, 8}, {0, 7}};
  for (const auto& [shift, bits] : kPasses) {
    HistogramKernel<<<GridFor(n), kThreads, 0, stream>>>(
        x, n, sanitize, control, histogram, shift, bits);
    PickDigitKernel<<<1, kHistogramBins, 0, stream>>>(control, histogram,
                                                      shift);
  }
  return cudaGetLastError();
}

cudaError_t LaunchCountSelected(const float* x, uint64_t n, bool sanitize,
                                Rule rule, float threshold, Control* control,
                                unsigned long long tile_counts[],
                                cudaStream_t stream) {
  const unsigned int tiles = TileCount(n);
  if (tiles > 0) {
    CountTilesKernel<<<tiles, kThreads, 0, stream>>>(
        x, n, sanitize, rule, threshold, control, tile_counts);
  }
  ScanTilesKernel<<<1, kScanThreads, 0, stream>>>(tile_counts, tiles, control);
  return cudaGetLastError();
}

cudaError_t LaunchScatterSelected(const float* x, float* residual, uint64_t n,
                                  bool sanitize, Rule rule, float threshold,
                                  Precision precision, const Control* control,
                                  const unsigned long long tile_counts[],
                                  uint32_t indices[], float values[],
                                  cudaStream_t stream) {
  const unsigned int tiles = TileCount(n);
  if (tiles == 0) return cudaSuccess;
  ScatterKernel<<<tiles, kThreads, 0, stream>>>(x, residual, n, sanitize, rule,
                                                threshold, precision, control,
                                                tile_counts, indices, values);
  return cudaGetLastError();
}

cudaError_t LaunchGather(const float* x, float* residual, bool sanitize,
                         const uint32_t indices[], uint64_t k,
                         Precision precision, const Control* control,
                         float values[], cudaStream_t stream) {
  if (k == 0) return cudaSuccess;
  GatherKernel<<<GridFor(k), kThreads, 0, stream>>>(
      x, residual, sanitize, indices, k, precision, control, values);
  return cudaGetLastError();
}

cudaError_t LaunchDense(const float* input, float* residual, uint64_t n,
                        bool zero_non_finite, Precision precision,
                        const Control* control, void* out,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DenseKernel<<<GridFor(n), kThreads, 0, stream>>>(
      input, residual, n, zero_non_finite, precision, control, out);
  return cudaGetLastError();
}

cudaError_t LaunchRoundTrip(const float* x, uint64_t n, Precision precision,
                            uint16_t out16[], float out[],
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  RoundTripKernel<<<GridFor(n), kThreads, 0, stream>>>(x, n, precision, out16,
                                                       out);
  return cudaGetLastError();
}

}  // namespace cuda_internal
}  // namespace gradwire
