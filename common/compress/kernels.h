// The inner loops of the compressors, in one portable version and in vector
// versions for the instruction sets the CPU has (internal to
// common/compress).
//
// Contract: for the same input, every version returns bit for bit what the
// portable version returns (selected indices, values, residuals, bits and
// sums), on finite, tied, zero, subnormal and non-finite inputs alike (a sum
// over a NaN is NaN in every version, its payload may differ; the
// compressors only sum finite or zeroed input); the vector versions only do
// it faster. tests/common/compress/kernels_test.cc
// holds every version to the portable one.
//
// Floating-point sums (the 1-bit scale, the QSGD norm) are accumulated in
// kSumLanes lanes, element i into lane i % kSumLanes, and the lanes are
// combined in one fixed order (CombineLanes), on every instruction set, so
// that the sum does not depend on the CPU.
//
// The table is chosen once per process: the widest instruction set that
// both the CPU and the build support, unless GRADWIRE_KERNELS names a
// narrower one ("portable", "avx2", "avx512"). Kernels take raw pointers:
// the vector versions live in files compiled with wider instruction sets,
// where no inline function shared with the rest of the program may be
// instantiated.
#ifndef GRADWIRE_COMMON_COMPRESS_KERNELS_H_
#define GRADWIRE_COMMON_COMPRESS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/precision.h"

namespace gradwire {
namespace compress_kernels {

enum class InstructionSet { kPortable, kAvx2, kAvx512 };

// "portable", "avx2", "avx512".
absl::string_view InstructionSetName(InstructionSet isa);
absl::optional<InstructionSet> ParseInstructionSet(absl::string_view name);

inline constexpr size_t kSumLanes = 16;

// The sum of the lanes, in a fixed pairwise order.
double CombineLanes(const double lanes[kSumLanes]);

struct KernelTable {
  InstructionSet isa;

  // For i in [0, n): r_out[i] = r[i] + scale * g'[i], where g'[i] is g[i],
  // or 0 when `zero_non_finite` and g[i] is not finite; then writes
  // first + i to `out` when |r_out[i]| >= threshold. Returns how many were
  // written, in increasing order; `out` must have room for n. The product
  // and the sum are rounded separately (no fused multiply-add). The new
  // value of each index written goes to `values` at the same position (room
  // for n as well), so that the selection never reads r at random. Sets
  // *non_finite when a new value is NaN or infinite, and leaves it as it
  // is otherwise. r_out may be r (in place); where it is not, it is written
  // with streaming stores: a second buffer the sum goes to is not read
  // again soon, and such stores skip reading each line before writing it.
  size_t (*accumulate_and_collect)(const float* g, float scale,
                                   bool zero_non_finite, const float* r,
                                   float* r_out, size_t n, float threshold,
                                   uint32_t first, uint32_t* out, float* values,
                                   bool* non_finite);

  // accumulate_and_collect with the worker's momentum folded in, so that
  // the velocity, the residual and the gradient are each read once: for i
  // in [0, n), u' = m * u[i] + g'[i] (g' as above; the product and the sum
  // rounded separately), u[i] = u', then v = r[i] + u'' with u'' = u', or 0
  // when `zero_non_finite` and u' is not finite, r[i] = v, and the
  // collection of accumulate_and_collect on v. The same bits as
  // UpdateVelocity's pass then accumulate_and_collect at scale 1. Sets
  // *non_finite when a v is NaN or infinite.
  size_t (*velocity_accumulate_and_collect)(const float* g, float m,
                                            bool zero_non_finite, float* u,
                                            float* r, size_t n, float threshold,
                                            uint32_t first, uint32_t* out,
                                            float* values, bool* non_finite);

  // Writes first + i to `out` for every i in [0, n) with |x[i]| >=
  // threshold; returns how many, in increasing order. `out` must have room
  // for n.
  size_t (*collect_at_least)(const float* x, size_t n, float threshold,
                             uint32_t first, uint32_t* out);

  // For i in [0, n): v = a[i] - b[i] (one float subtraction); writes
  // first + i to `out` and v to `values` when |v| is not below threshold:
  // |v| >= threshold, or v (or the threshold) is NaN, so that no NaN goes
  // unseen. Returns how many, in increasing order; `out` and `values` must
  // have room for n.
  // Compresses a difference (a shard's weights against the shadow its
  // workers hold) without a buffer for it.
  size_t (*difference_and_collect)(const float* a, const float* b, size_t n,
                                   float threshold, uint32_t first,
                                   uint32_t* out, float* values);

  // Dense error feedback: for i in [0, n), v = r[i] + g'[i] (g' as above),
  // q = v rounded to `precision`, values[i] = q, r[i] = v - q. A store to
  // r[i] that would not change its bits may be skipped. Returns whether
  // every v was finite (a residual can overflow).
  bool (*dense_feedback)(const float* g, bool zero_non_finite,
                         ValuePrecision precision, float* r, size_t n,
                         float* values);

  // values[i] = x'[i] rounded to `precision` (x' sanitised as g' above).
  void (*round_dense)(const float* x, bool zero_non_finite,
                      ValuePrecision precision, size_t n, float* values);

  // 1-bit sign: bit i of `bits` (word i / 64, bit i % 64) is set when
  // x'[i] >= 0; words are overwritten whole (BitWords(n) of them). Adds
  // |x'[i]| into lanes[i % kSumLanes].
  void (*sign_bits)(const float* x, bool zero_non_finite, size_t n,
                    uint64_t* bits, double lanes[kSumLanes]);

  // Adds double(x'[i])^2 into lanes[i % kSumLanes].
  void (*sum_squares)(const float* x, bool zero_non_finite, size_t n,
                      double lanes[kSumLanes]);

  // QSGD's stochastic levels: for i in [0, n), a = float(min(|x'[i]| *
  // to_levels, s)) (the product in double), u = the (i + 1)-th output of
  // SplitMix64(seed) as NextUnitFloat makes it, levels[i] = floor(a) + (u <
  // a - floor(a)); bit i of negative_bits is set when x'[i] < 0 (words
  // overwritten whole). x' must be finite (QSGD refuses or zeroes
  // non-finite input first).
  void (*qsgd_levels)(const float* x, bool zero_non_finite, size_t n,
                      double to_levels, float s, uint64_t seed,
                      uint16_t* levels, uint64_t* negative_bits);

  // Error feedback for 1-bit sign, first pass: for i in [0, n), v = r[i] +
  // g'[i], r[i] = v; then, with v' = v sanitised like g', sets bit i of
  // `bits` when v' >= 0 (words overwritten whole) and adds |v'| into
  // lanes[i % kSumLanes]. Returns whether every v was finite.
  bool (*accumulate_sign)(const float* g, bool zero_non_finite, float* r,
                          size_t n, uint64_t* bits, double lanes[kSumLanes]);

  // Second pass: r[i] -= (bit i set ? scale : -scale).
  void (*subtract_sign)(const uint64_t* bits, float scale, float* r, size_t n);

  // Error feedback for QSGD, first pass: v = r[i] + g'[i], r[i] = v, and
  // double(v')^2 added into lanes[i % kSumLanes]. Returns whether every v
  // was finite.
  bool (*accumulate_squares)(const float* g, bool zero_non_finite, float* r,
                             size_t n, double lanes[kSumLanes]);

  // Second pass: qsgd_levels on x = r, then r[i] -= the decoded value,
  // (negative ? -1 : 1) * (norm * (float(level) / s)).
  void (*qsgd_feedback)(float* r, bool zero_non_finite, size_t n,
                        double to_levels, float s, float norm, uint64_t seed,
                        uint16_t* levels, uint64_t* negative_bits);

  // out[i] = the IEEE binary16 value whose bits are the little-endian
  // 16-bit word at src + 2 * i (src need not be aligned), for i in [0, n):
  // exact, as every half is a float. For finite halves (the codec checks
  // them first); the quiet bit of a NaN may differ between versions.
  void (*half_to_float)(const uint8_t* src, size_t n, float* out);

  // The little-endian binary16 bits of FloatToHalfBits(in[i]) at
  // dst + 2 * i (dst need not be aligned), for i in [0, n): round to
  // nearest even, saturating at +-65504, exactly as the scalar conversion
  // in every version (non-finite inputs included).
  void (*float_to_half)(const float* in, size_t n, uint8_t* dst);

  // Whether every x[i], i in [0, n), is finite (no NaN, no infinity).
  // Reads all n even after a non-finite one: the answer is the only output,
  // and a branch per vector would slow the common, finite case.
  bool (*all_finite)(const float* x, size_t n);
};

// SplitMix64's increment: the generator's state after i outputs is
// seed + i * kSplitMixIncrement, so any output can be computed directly.
inline constexpr uint64_t kSplitMixIncrement = 0x9e3779b97f4a7c15ull;

// The table this process uses (see above).
const KernelTable& Kernels();

// The table of `isa`; nullopt when this build or this CPU lacks it.
absl::optional<const KernelTable*> KernelsFor(InstructionSet isa);

// The portable table, for the vector versions' edges and for tests.
const KernelTable& PortableKernels();

// Implemented in the per-instruction-set files; null when the build lacks
// the instruction set.
const KernelTable* Avx2Kernels();
const KernelTable* Avx512Kernels();

}  // namespace compress_kernels
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_KERNELS_H_
