// The AVX-512 kernels (F, BW, VL, DQ and F16C). Compiled with those
// instruction sets enabled and -ffp-contract=off; only intrinsics and the
// portable table's functions are called here (see kernels.h).
#include <immintrin.h>

#include <limits>

#include "common/compress/kernels.h"

namespace gradwire {
namespace compress_kernels {
namespace {

constexpr size_t kLanes = 16;  // floats per register

// Stores of dense outputs larger than this bypass the caches: such a buffer
// cannot stay cached anyway, and a streaming store skips reading each line
// before writing it.
constexpr size_t kStreamBytes = size_t{8} << 20;

inline __mmask16 FiniteMask(__m512 x) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  return _mm512_cmpneq_epi32_mask(
      _mm512_and_si512(_mm512_castps_si512(x), exponent), exponent);
}

inline __m512 Sanitized(__m512 x, bool zero_non_finite) {
  return zero_non_finite ? _mm512_maskz_mov_ps(FiniteMask(x), x) : x;
}

// Not |x| < threshold: at least it, or NaN on either side.
inline __mmask16 NotBelow(__m512 x, __m512 threshold) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(x), threshold, _CMP_NLT_UQ);
}

inline __mmask16 AtLeast(__m512 x, __m512 threshold) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(x), threshold, _CMP_GE_OQ);
}

// Appends base + (each set lane of `mask`) to out, in lane order, one lane
// at a time. Few lanes pass a selection threshold, and AVX-512's compress
// is slow where it matters: AMD's Zen 4 microcodes the masked
// compress-store at over a hundred cycles (the collecting loops ran slower
// than the portable ones), and a compress into a register then a full
// store still lost to this loop (`gradwire-bench-kernels
// --benchmark_filter=collect`, docs/benchmarks/compress.md).
inline size_t Emit(uint32_t mask, uint32_t base, uint32_t* out) {
  size_t count = 0;
  for (; mask != 0; mask &= mask - 1) {
    out[count++] = base + static_cast<uint32_t>(__builtin_ctz(mask));
  }
  return count;
}

// Emit for the lanes of two registers set in `mask` (v0's in its low
// bits), each index with its value beside it in `values`.
inline size_t EmitWithValues(uint32_t mask, __m512 v0, __m512 v1, uint32_t base,
                             uint32_t* out, float* values) {
  float lanes[2 * kLanes];
  _mm512_storeu_ps(lanes, v0);
  _mm512_storeu_ps(lanes + kLanes, v1);
  size_t count = 0;
  for (; mask != 0; mask &= mask - 1) {
    const auto lane = static_cast<uint32_t>(__builtin_ctz(mask));
    values[count] = lanes[lane];
    out[count++] = base + lane;
  }
  return count;
}

// Writes `v` to values + i with a streaming store when `stream` (values + i
// then 64-byte aligned), else a plain one.
inline void StoreValues(float* values, size_t i, __m512 v, bool stream) {
  if (stream) {
    _mm512_stream_ps(values + i, v);
  } else {
    _mm512_storeu_ps(values + i, v);
  }
}

// Elements before `values` + result are 64-byte aligned (at most n).
inline size_t HeadToAlignment(const float* values, size_t n) {
  const auto address = reinterpret_cast<uintptr_t>(values);
  const size_t misaligned = (64 - address % 64) % 64;
  if (misaligned % sizeof(float) != 0) return n;  // never aligns
  const size_t head = misaligned / sizeof(float);
  return head < n ? head : n;
}

template <bool kStream>
size_t AccumulateAndCollectVectors(const float* g, float scale,
                                   bool zero_non_finite, const float* r,
                                   float* r_out, size_t* i_inout, size_t n,
                                   float threshold, uint32_t first,
                                   uint32_t* out, float* values,
                                   bool* non_finite) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 t = _mm512_set1_ps(threshold);
  __mmask16 finite = 0xffff;
  size_t count = 0;
  size_t i = *i_inout;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 g0 = Sanitized(_mm512_loadu_ps(g + i), zero_non_finite);
    const __m512 g1 =
        Sanitized(_mm512_loadu_ps(g + i + kLanes), zero_non_finite);
    const __m512 v0 =
        _mm512_add_ps(_mm512_loadu_ps(r + i), _mm512_mul_ps(s, g0));
    const __m512 v1 =
        _mm512_add_ps(_mm512_loadu_ps(r + i + kLanes), _mm512_mul_ps(s, g1));
    StoreValues(r_out, i, v0, kStream);
    StoreValues(r_out, i + kLanes, v1, kStream);
    finite &= FiniteMask(v0) & FiniteMask(v1);
    const uint32_t mask = AtLeast(v0, t) | (uint32_t{AtLeast(v1, t)} << kLanes);
    if (mask != 0) {
      count += EmitWithValues(mask, v0, v1, first + static_cast<uint32_t>(i),
                              out + count, values + count);
    }
  }
  if (kStream) _mm_sfence();
  if (finite != 0xffff) *non_finite = true;
  *i_inout = i;
  return count;
}

size_t AccumulateAndCollect(const float* g, float scale, bool zero_non_finite,
                            const float* r, float* r_out, size_t n,
                            float threshold, uint32_t first, uint32_t* out,
                            float* values, bool* non_finite) {
  const KernelTable& portable = PortableKernels();
  const bool stream = r_out != r;
  size_t i = stream ? HeadToAlignment(r_out, n) : 0;
  size_t count = portable.accumulate_and_collect(g, scale, zero_non_finite, r,
                                                 r_out, i, threshold, first,
                                                 out, values, non_finite);
  count +=
      (stream ? AccumulateAndCollectVectors<true>
              : AccumulateAndCollectVectors<false>)(g, scale, zero_non_finite,
                                                    r, r_out, &i, n, threshold,
                                                    first, out + count,
                                                    values + count, non_finite);
  return count + portable.accumulate_and_collect(
                     g + i, scale, zero_non_finite, r + i, r_out + i, n - i,
                     threshold, first + static_cast<uint32_t>(i), out + count,
                     values + count, non_finite);
}

// The residual's new value after the velocity step (kernels.h), which
// also stores u' at u + i.
inline __m512 VelocityStep(const float* g, __m512 m, bool zero_non_finite,
                           float* u, const float* r, size_t i) {
  const __m512 product = _mm512_mul_ps(m, _mm512_loadu_ps(u + i));
  const __m512 velocity = _mm512_add_ps(
      product, Sanitized(_mm512_loadu_ps(g + i), zero_non_finite));
  _mm512_storeu_ps(u + i, velocity);
  return _mm512_add_ps(_mm512_loadu_ps(r + i),
                       Sanitized(velocity, zero_non_finite));
}

size_t VelocityAccumulateAndCollect(const float* g, float momentum,
                                    bool zero_non_finite, float* u, float* r,
                                    size_t n, float threshold, uint32_t first,
                                    uint32_t* out, float* values,
                                    bool* non_finite) {
  const __m512 m = _mm512_set1_ps(momentum);
  const __m512 t = _mm512_set1_ps(threshold);
  __mmask16 finite = 0xffff;
  size_t count = 0;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 v0 = VelocityStep(g, m, zero_non_finite, u, r, i);
    const __m512 v1 = VelocityStep(g, m, zero_non_finite, u, r, i + kLanes);
    _mm512_storeu_ps(r + i, v0);
    _mm512_storeu_ps(r + i + kLanes, v1);
    finite &= FiniteMask(v0) & FiniteMask(v1);
    const uint32_t mask = AtLeast(v0, t) | (uint32_t{AtLeast(v1, t)} << kLanes);
    if (mask != 0) {
      count += EmitWithValues(mask, v0, v1, first + static_cast<uint32_t>(i),
                              out + count, values + count);
    }
  }
  if (finite != 0xffff) *non_finite = true;
  return count + PortableKernels().velocity_accumulate_and_collect(
                     g + i, momentum, zero_non_finite, u + i, r + i, n - i,
                     threshold, first + static_cast<uint32_t>(i), out + count,
                     values + count, non_finite);
}

size_t CollectAtLeast(const float* x, size_t n, float threshold, uint32_t first,
                      uint32_t* out) {
  const __m512 t = _mm512_set1_ps(threshold);
  size_t count = 0;
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    // Four registers per test: selected elements are rare.
    const __mmask16 m0 = AtLeast(_mm512_loadu_ps(x + i), t);
    const __mmask16 m1 = AtLeast(_mm512_loadu_ps(x + i + 16), t);
    const __mmask16 m2 = AtLeast(_mm512_loadu_ps(x + i + 32), t);
    const __mmask16 m3 = AtLeast(_mm512_loadu_ps(x + i + 48), t);
    if ((m0 | m1 | m2 | m3) == 0) continue;
    const uint32_t base = first + static_cast<uint32_t>(i);
    count += Emit(m0, base, out + count);
    count += Emit(m1, base + 16, out + count);
    count += Emit(m2, base + 32, out + count);
    count += Emit(m3, base + 48, out + count);
  }
  return count + PortableKernels().collect_at_least(
                     x + i, n - i, threshold, first + static_cast<uint32_t>(i),
                     out + count);
}

size_t DifferenceAndCollect(const float* a, const float* b, size_t n,
                            float threshold, uint32_t first, uint32_t* out,
                            float* values) {
  const __m512 t = _mm512_set1_ps(threshold);
  size_t count = 0;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 v0 =
        _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    const __m512 v1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + kLanes),
                                    _mm512_loadu_ps(b + i + kLanes));
    const uint32_t mask =
        NotBelow(v0, t) | (uint32_t{NotBelow(v1, t)} << kLanes);
    if (mask != 0) {
      count += EmitWithValues(mask, v0, v1, first + static_cast<uint32_t>(i),
                              out + count, values + count);
    }
  }
  return count + PortableKernels().difference_and_collect(
                     a + i, b + i, n - i, threshold,
                     first + static_cast<uint32_t>(i), out + count,
                     values + count);
}

// v rounded to fp16 and back, for finite v: saturated to +-65504 like
// FloatToHalfBits, round to nearest even by the conversion itself.
inline __m512 RoundFp16(__m512 v) {
  const __m512 max = _mm512_set1_ps(kFp16Max);
  const __m512 clamped = _mm512_max_ps(_mm512_min_ps(v, max),
                                       _mm512_sub_ps(_mm512_setzero_ps(), max));
  return _mm512_cvtph_ps(
      _mm512_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// v rounded to bf16 and back, for finite v, as FloatToBf16Bits does it.
inline __m512 RoundBf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i odd =
      _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd);
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __mmask16 overflow =
      _mm512_cmpeq_epi32_mask(_mm512_and_si512(rounded, exponent), exponent);
  const __m512i truncated = _mm512_and_si512(
      rounded, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m512i saturated = _mm512_or_si512(
      _mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0x80000000u))),
      _mm512_set1_epi32(0x7f7f0000));
  return _mm512_castsi512_ps(
      _mm512_mask_mov_epi32(truncated, overflow, saturated));
}

// Rounds finite lanes; the caller handles registers with a non-finite lane.
inline __m512 RoundFinite(__m512 v, ValuePrecision precision) {
  switch (precision) {
    case ValuePrecision::kFp16:
      return RoundFp16(v);
    case ValuePrecision::kBf16:
      return RoundBf16(v);
    case ValuePrecision::kFp32:
      break;
  }
  return v;
}

bool DenseFeedback(const float* g, bool zero_non_finite,
                   ValuePrecision precision, float* r, size_t n,
                   float* values) {
  const KernelTable& portable = PortableKernels();
  const bool stream = n * sizeof(float) >= kStreamBytes;
  size_t i = stream ? HeadToAlignment(values, n) : 0;
  bool finite =
      portable.dense_feedback(g, zero_non_finite, precision, r, i, values);
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 r_old = _mm512_loadu_ps(r + i);
    const __m512 v = _mm512_add_ps(
        r_old, Sanitized(_mm512_loadu_ps(g + i), zero_non_finite));
    if (FiniteMask(v) != 0xffff) {
      // Infinities and NaN take the scalar rules of the precision.
      float lanes[kLanes];
      finite &= portable.dense_feedback(g + i, zero_non_finite, precision,
                                        r + i, kLanes, lanes);
      StoreValues(values, i, _mm512_loadu_ps(lanes), stream);
      continue;
    }
    const __m512 q = RoundFinite(v, precision);
    StoreValues(values, i, q, stream);
    const __m512 r_new = _mm512_sub_ps(v, q);
    // A residual that stays as it was (zero, for fp32) is not written back.
    if (_mm512_cmpneq_epi32_mask(_mm512_castps_si512(r_new),
                                 _mm512_castps_si512(r_old)) != 0) {
      _mm512_storeu_ps(r + i, r_new);
    }
  }
  if (stream) _mm_sfence();
  return portable.dense_feedback(g + i, zero_non_finite, precision, r + i,
                                 n - i, values + i) &&
         finite;
}

void RoundDense(const float* x, bool zero_non_finite, ValuePrecision precision,
                size_t n, float* values) {
  const KernelTable& portable = PortableKernels();
  const bool stream = n * sizeof(float) >= kStreamBytes;
  size_t i = stream ? HeadToAlignment(values, n) : 0;
  portable.round_dense(x, zero_non_finite, precision, i, values);
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 v = Sanitized(_mm512_loadu_ps(x + i), zero_non_finite);
    if (FiniteMask(v) != 0xffff) {
      float lanes[kLanes];
      portable.round_dense(x + i, zero_non_finite, precision, kLanes, lanes);
      StoreValues(values, i, _mm512_loadu_ps(lanes), stream);
      continue;
    }
    StoreValues(values, i, RoundFinite(v, precision), stream);
  }
  if (stream) _mm_sfence();
  portable.round_dense(x + i, zero_non_finite, precision, n - i, values + i);
}

void SignBits(const float* x, bool zero_non_finite, size_t n, uint64_t* bits,
              double lanes[kSumLanes]) {
  __m512d lo = _mm512_loadu_pd(lanes);
  __m512d hi = _mm512_loadu_pd(lanes + 8);
  const __m512 zero = _mm512_setzero_ps();
  size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    uint64_t word = 0;
    for (size_t part = 0; part < 4; ++part) {
      const __m512 v =
          Sanitized(_mm512_loadu_ps(x + w * 64 + part * 16), zero_non_finite);
      const __m512 a = _mm512_abs_ps(v);
      lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
      hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)));
      const __mmask16 positive = _mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ);
      word |= static_cast<uint64_t>(positive) << (part * 16);
    }
    bits[w] = word;
  }
  _mm512_storeu_pd(lanes, lo);
  _mm512_storeu_pd(lanes + 8, hi);
  PortableKernels().sign_bits(x + w * 64, zero_non_finite, n - w * 64, bits + w,
                              lanes);
}

void SumSquares(const float* x, bool zero_non_finite, size_t n,
                double lanes[kSumLanes]) {
  __m512d lo = _mm512_loadu_pd(lanes);
  __m512d hi = _mm512_loadu_pd(lanes + 8);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 v = Sanitized(_mm512_loadu_ps(x + i), zero_non_finite);
    const __m512d vlo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d vhi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
    lo = _mm512_add_pd(lo, _mm512_mul_pd(vlo, vlo));
    hi = _mm512_add_pd(hi, _mm512_mul_pd(vhi, vhi));
  }
  _mm512_storeu_pd(lanes, lo);
  _mm512_storeu_pd(lanes + 8, hi);
  PortableKernels().sum_squares(x + i, zero_non_finite, n - i, lanes);
}

// SplitMix64's outputs for the eight states in `state`, as unit floats
// (the top 24 bits times 2^-24, exact).
inline __m256 UnitFloats(__m512i state) {
  __m512i z = state;
  z = _mm512_mullo_epi64(
      _mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
      _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ull)));
  z = _mm512_mullo_epi64(
      _mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
      _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebull)));
  // SplitMix64's last step, z ^= z >> 31, leaves bits 40-63 as they are
  // (z >> 31 is zero there), and only those are used: skipped.
  const __m256 top = _mm512_cvtepi64_ps(_mm512_srli_epi64(z, 40));
  return _mm256_mul_ps(top, _mm256_set1_ps(1.0f / 16777216.0f));
}

// Levels of eight elements `v` (sanitised) whose generator states are
// `state`, as eight 32-bit integers.
inline __m256i EightLevels(__m256 v, __m512i state, __m512d to_levels,
                           __m512d s) {
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
  // min_pd(s, p) is (s < p ? s : p), std::min(p, s) operand for operand.
  const __m256 a = _mm512_cvtpd_ps(
      _mm512_min_pd(s, _mm512_mul_pd(_mm512_cvtps_pd(magnitude), to_levels)));
  const __m256 low = _mm256_floor_ps(a);
  const __m256 up =
      _mm256_cmp_ps(UnitFloats(state), _mm256_sub_ps(a, low), _CMP_LT_OQ);
  // up is all ones (-1) where the level rounds up.
  return _mm256_sub_epi32(_mm256_cvttps_epi32(low), _mm256_castps_si256(up));
}

// QSGD levels of x[0, n) (and, with `feedback`, r -= the decoded values,
// where r is x): the shared loop of QsgdLevels and QsgdFeedback.
template <bool feedback>
void QsgdLoop(float* r, const float* x, bool zero_non_finite, size_t n,
              double to_levels, float s, float norm, uint64_t seed,
              uint16_t* levels, uint64_t* negative_bits) {
  const __m512d scale = _mm512_set1_pd(to_levels);
  const __m512d top = _mm512_set1_pd(static_cast<double>(s));
  const __m512 s_vector = _mm512_set1_ps(s);
  const __m512 norm_vector = _mm512_set1_ps(norm);
  const __m512i step8 =
      _mm512_set1_epi64(static_cast<long long>(8 * kSplitMixIncrement));
  // States of outputs 1..8 (output k uses seed + k * increment).
  __m512i state = _mm512_add_epi64(
      _mm512_set1_epi64(static_cast<long long>(seed)),
      _mm512_mullo_epi64(
          _mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8),
          _mm512_set1_epi64(static_cast<long long>(kSplitMixIncrement))));
  const __m512 zero = _mm512_setzero_ps();
  size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    uint64_t word = 0;
    for (size_t part = 0; part < 4; ++part) {
      const size_t i = w * 64 + part * 16;
      const __m512 raw = _mm512_loadu_ps(x + i);
      const __m512 v = Sanitized(raw, zero_non_finite);
      const __m256i lo =
          EightLevels(_mm512_castps512_ps256(v), state, scale, top);
      state = _mm512_add_epi64(state, step8);
      const __m256i hi =
          EightLevels(_mm512_extractf32x8_ps(v, 1), state, scale, top);
      state = _mm512_add_epi64(state, step8);
      const __m512i both =
          _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(levels + i),
                          _mm512_cvtepi32_epi16(both));
      const __mmask16 negative = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
      word |= static_cast<uint64_t>(negative) << (part * 16);
      if (feedback) {
        const __m512 magnitude = _mm512_mul_ps(
            norm_vector, _mm512_div_ps(_mm512_cvtepi32_ps(both), s_vector));
        // Negated by its sign bit, as the decoder's unary minus does.
        const __m512 decoded = _mm512_castsi512_ps(_mm512_mask_xor_epi32(
            _mm512_castps_si512(magnitude), negative,
            _mm512_castps_si512(magnitude),
            _mm512_set1_epi32(static_cast<int>(0x80000000u))));
        _mm512_storeu_ps(r + i, _mm512_sub_ps(raw, decoded));
      }
    }
    negative_bits[w] = word;
  }
  const size_t done = w * 64;
  const uint64_t tail_seed = seed + done * kSplitMixIncrement;
  if (feedback) {
    PortableKernels().qsgd_feedback(r + done, zero_non_finite, n - done,
                                    to_levels, s, norm, tail_seed,
                                    levels + done, negative_bits + w);
  } else {
    PortableKernels().qsgd_levels(x + done, zero_non_finite, n - done,
                                  to_levels, s, tail_seed, levels + done,
                                  negative_bits + w);
  }
}

void QsgdLevels(const float* x, bool zero_non_finite, size_t n,
                double to_levels, float s, uint64_t seed, uint16_t* levels,
                uint64_t* negative_bits) {
  QsgdLoop<false>(nullptr, x, zero_non_finite, n, to_levels, s, 0.0f, seed,
                  levels, negative_bits);
}

void QsgdFeedback(float* r, bool zero_non_finite, size_t n, double to_levels,
                  float s, float norm, uint64_t seed, uint16_t* levels,
                  uint64_t* negative_bits) {
  QsgdLoop<true>(r, r, zero_non_finite, n, to_levels, s, norm, seed, levels,
                 negative_bits);
}

// Adds |kept| (or kept^2 when `squares`) of 16 floats into the lane sums.
template <bool squares>
inline void AddToLanes(__m512 kept, __m512d* lo, __m512d* hi) {
  const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(kept));
  const __m512d b = _mm512_cvtps_pd(_mm512_extractf32x8_ps(kept, 1));
  if (squares) {
    *lo = _mm512_add_pd(*lo, _mm512_mul_pd(a, a));
    *hi = _mm512_add_pd(*hi, _mm512_mul_pd(b, b));
  } else {
    *lo = _mm512_add_pd(*lo, _mm512_abs_pd(a));
    *hi = _mm512_add_pd(*hi, _mm512_abs_pd(b));
  }
}

bool AccumulateSign(const float* g, bool zero_non_finite, float* r, size_t n,
                    uint64_t* bits, double lanes[kSumLanes]) {
  __m512d lo = _mm512_loadu_pd(lanes);
  __m512d hi = _mm512_loadu_pd(lanes + 8);
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 finite = 0xffff;
  size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    uint64_t word = 0;
    for (size_t part = 0; part < 4; ++part) {
      const size_t i = w * 64 + part * 16;
      const __m512 v =
          _mm512_add_ps(_mm512_loadu_ps(r + i),
                        Sanitized(_mm512_loadu_ps(g + i), zero_non_finite));
      _mm512_storeu_ps(r + i, v);
      finite &= FiniteMask(v);
      const __m512 kept = Sanitized(v, zero_non_finite);
      AddToLanes<false>(kept, &lo, &hi);
      const __mmask16 positive = _mm512_cmp_ps_mask(kept, zero, _CMP_GE_OQ);
      word |= static_cast<uint64_t>(positive) << (part * 16);
    }
    bits[w] = word;
  }
  _mm512_storeu_pd(lanes, lo);
  _mm512_storeu_pd(lanes + 8, hi);
  const size_t done = w * 64;
  return PortableKernels().accumulate_sign(g + done, zero_non_finite, r + done,
                                           n - done, bits + w, lanes) &&
         finite == 0xffff;
}

void SubtractSign(const uint64_t* bits, float scale, float* r, size_t n) {
  const __m512 plus = _mm512_set1_ps(scale);
  const __m512 minus = _mm512_set1_ps(-scale);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const auto positive = static_cast<__mmask16>(bits[i >> 6] >> (i & 63));
    const __m512 decoded = _mm512_mask_blend_ps(positive, minus, plus);
    _mm512_storeu_ps(r + i, _mm512_sub_ps(_mm512_loadu_ps(r + i), decoded));
  }
  // i is a multiple of 16: the tail starts inside word i / 64 at bit i % 64.
  for (; i < n; ++i) {
    r[i] -= ((bits[i >> 6] >> (i & 63)) & 1u) ? scale : -scale;
  }
}

bool AccumulateSquares(const float* g, bool zero_non_finite, float* r, size_t n,
                       double lanes[kSumLanes]) {
  __m512d lo = _mm512_loadu_pd(lanes);
  __m512d hi = _mm512_loadu_pd(lanes + 8);
  __mmask16 finite = 0xffff;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 v =
        _mm512_add_ps(_mm512_loadu_ps(r + i),
                      Sanitized(_mm512_loadu_ps(g + i), zero_non_finite));
    _mm512_storeu_ps(r + i, v);
    finite &= FiniteMask(v);
    AddToLanes<true>(Sanitized(v, zero_non_finite), &lo, &hi);
  }
  _mm512_storeu_pd(lanes, lo);
  _mm512_storeu_pd(lanes + 8, hi);
  return PortableKernels().accumulate_squares(g + i, zero_non_finite, r + i,
                                              n - i, lanes) &&
         finite == 0xffff;
}

void HalfToFloat(const uint8_t* src, size_t n, float* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i half =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(half));
  }
  PortableKernels().half_to_float(src + 2 * i, n - i, out + i);
}

// F16C's conversion rounds to nearest even like FloatToHalfBits but
// overflows to infinity where that saturates, so finite values are clamped
// to +-65504 first (the values that round past it saturate there); a block
// holding a NaN or an infinity goes through the portable version.
void FloatToHalf(const float* in, size_t n, uint8_t* dst) {
  const __m512 limit = _mm512_set1_ps(65504.0f);
  const __m512 negative_limit = _mm512_set1_ps(-65504.0f);
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    // Unordered (NaN) or above FLT_MAX (infinity).
    if (_mm512_cmp_ps_mask(_mm512_abs_ps(v), largest, _CMP_NLE_UQ) != 0) {
      PortableKernels().float_to_half(in + i, 16, dst + 2 * i);
      continue;
    }
    const __m512 clamped =
        _mm512_min_ps(_mm512_max_ps(v, negative_limit), limit);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i),
                        _mm512_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT |
                                                     _MM_FROUND_NO_EXC));
  }
  PortableKernels().float_to_half(in + i, n - i, dst + 2 * i);
}

bool AllFiniteVectors(const float* x, size_t n) {
  // The lanes whose exponent field is all ones (NaN or infinity), OR-ed
  // over four independent loads a step so that the reads stream.
  __mmask16 bad = 0;
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    bad |= static_cast<__mmask16>(~FiniteMask(_mm512_loadu_ps(x + i)) |
                                  ~FiniteMask(_mm512_loadu_ps(x + i + 16)) |
                                  ~FiniteMask(_mm512_loadu_ps(x + i + 32)) |
                                  ~FiniteMask(_mm512_loadu_ps(x + i + 48)));
  }
  return bad == 0 && PortableKernels().all_finite(x + i, n - i);
}

constexpr KernelTable kAvx512 = {
    InstructionSet::kAvx512,
    AccumulateAndCollect,
    VelocityAccumulateAndCollect,
    CollectAtLeast,
    DifferenceAndCollect,
    DenseFeedback,
    RoundDense,
    SignBits,
    SumSquares,
    QsgdLevels,
    AccumulateSign,
    SubtractSign,
    AccumulateSquares,
    QsgdFeedback,
    HalfToFloat,
    FloatToHalf,
    AllFiniteVectors,
};

}  // namespace

const KernelTable* Avx512Kernels() { return &kAvx512; }

}  // namespace compress_kernels
}  // namespace gradwire
