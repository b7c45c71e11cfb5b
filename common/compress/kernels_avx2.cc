// The AVX2 kernels (with F16C). Compiled with those instruction sets enabled
// and -ffp-contract=off; only intrinsics and the portable table's functions
// are called here (see kernels.h).
#include <immintrin.h>

#include <limits>

#include "common/compress/kernels.h"

namespace gradwire {
namespace compress_kernels {
namespace {

constexpr size_t kLanes = 8;  // floats per register

// As in kernels_avx512.cc: dense outputs this large bypass the caches.
constexpr size_t kStreamBytes = size_t{8} << 20;

inline __m256 Abs(__m256 x) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
}

// All-ones lanes where x is finite.
inline __m256i FiniteLanes(__m256 x) {
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  const __m256i e = _mm256_and_si256(_mm256_castps_si256(x), exponent);
  return _mm256_xor_si256(_mm256_cmpeq_epi32(e, exponent),
                          _mm256_set1_epi32(-1));
}

inline bool AllFinite(__m256 x) {
  return _mm256_movemask_ps(_mm256_castsi256_ps(FiniteLanes(x))) == 0xff;
}

inline __m256 Sanitized(__m256 x, bool zero_non_finite) {
  return zero_non_finite ? _mm256_and_ps(x, _mm256_castsi256_ps(FiniteLanes(x)))
                         : x;
}

// Not |x| < threshold: at least it, or NaN on either side.
inline unsigned NotBelow(__m256 x, __m256 threshold) {
  return static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_cmp_ps(Abs(x), threshold, _CMP_NLT_UQ)));
}

inline unsigned AtLeast(__m256 x, __m256 threshold) {
  return static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_cmp_ps(Abs(x), threshold, _CMP_GE_OQ)));
}

// Appends base + (each set bit of `mask`) to out, in bit order.
inline size_t Emit(unsigned mask, uint32_t base, uint32_t* out) {
  size_t count = 0;
  while (mask != 0) {
    out[count++] = base + static_cast<uint32_t>(__builtin_ctz(mask));
    mask &= mask - 1;
  }
  return count;
}

// Emit for the lanes of two registers set in `mask` (v0's in its low
// bits), each index with its value beside it in `values`.
inline size_t EmitWithValues(unsigned mask, __m256 v0, __m256 v1, uint32_t base,
                             uint32_t* out, float* values) {
  float lanes[2 * kLanes];
  _mm256_storeu_ps(lanes, v0);
  _mm256_storeu_ps(lanes + kLanes, v1);
  size_t count = 0;
  for (; mask != 0; mask &= mask - 1) {
    const auto lane = static_cast<uint32_t>(__builtin_ctz(mask));
    values[count] = lanes[lane];
    out[count++] = base + lane;
  }
  return count;
}

// Writes `v` to values + i with a streaming store when `stream` (values + i
// then 32-byte aligned), else a plain one.
inline void StoreValues(float* values, size_t i, __m256 v, bool stream) {
  if (stream) {
    _mm256_stream_ps(values + i, v);
  } else {
    _mm256_storeu_ps(values + i, v);
  }
}

// Elements before `values` + result are 32-byte aligned (at most n).
inline size_t HeadToAlignment(const float* values, size_t n) {
  const auto address = reinterpret_cast<uintptr_t>(values);
  const size_t misaligned = (32 - address % 32) % 32;
  if (misaligned % sizeof(float) != 0) return n;
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
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 t = _mm256_set1_ps(threshold);
  __m256i finite = _mm256_set1_epi32(-1);
  size_t count = 0;
  size_t i = *i_inout;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256 g0 = Sanitized(_mm256_loadu_ps(g + i), zero_non_finite);
    const __m256 g1 = Sanitized(_mm256_loadu_ps(g + i + 8), zero_non_finite);
    const __m256 v0 =
        _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_mul_ps(s, g0));
    const __m256 v1 =
        _mm256_add_ps(_mm256_loadu_ps(r + i + 8), _mm256_mul_ps(s, g1));
    StoreValues(r_out, i, v0, kStream);
    StoreValues(r_out, i + 8, v1, kStream);
    finite = _mm256_and_si256(
        finite, _mm256_and_si256(FiniteLanes(v0), FiniteLanes(v1)));
    const unsigned mask = AtLeast(v0, t) | (AtLeast(v1, t) << 8);
    if (mask != 0) {
      count += EmitWithValues(mask, v0, v1, first + static_cast<uint32_t>(i),
                              out + count, values + count);
    }
  }
  if (kStream) _mm_sfence();
  if (_mm256_movemask_ps(_mm256_castsi256_ps(finite)) != 0xff) {
    *non_finite = true;
  }
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
inline __m256 VelocityStep(const float* g, __m256 m, bool zero_non_finite,
                           float* u, const float* r, size_t i) {
  const __m256 product = _mm256_mul_ps(m, _mm256_loadu_ps(u + i));
  const __m256 velocity = _mm256_add_ps(
      product, Sanitized(_mm256_loadu_ps(g + i), zero_non_finite));
  _mm256_storeu_ps(u + i, velocity);
  return _mm256_add_ps(_mm256_loadu_ps(r + i),
                       Sanitized(velocity, zero_non_finite));
}

size_t VelocityAccumulateAndCollect(const float* g, float momentum,
                                    bool zero_non_finite, float* u, float* r,
                                    size_t n, float threshold, uint32_t first,
                                    uint32_t* out, float* values,
                                    bool* non_finite) {
  const __m256 m = _mm256_set1_ps(momentum);
  const __m256 t = _mm256_set1_ps(threshold);
  __m256i finite = _mm256_set1_epi32(-1);
  size_t count = 0;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256 v0 = VelocityStep(g, m, zero_non_finite, u, r, i);
    const __m256 v1 = VelocityStep(g, m, zero_non_finite, u, r, i + kLanes);
    _mm256_storeu_ps(r + i, v0);
    _mm256_storeu_ps(r + i + kLanes, v1);
    finite = _mm256_and_si256(
        finite, _mm256_and_si256(FiniteLanes(v0), FiniteLanes(v1)));
    const unsigned mask = AtLeast(v0, t) | (AtLeast(v1, t) << kLanes);
    if (mask != 0) {
      count += EmitWithValues(mask, v0, v1, first + static_cast<uint32_t>(i),
                              out + count, values + count);
    }
  }
  if (_mm256_movemask_ps(_mm256_castsi256_ps(finite)) != 0xff) {
    *non_finite = true;
  }
  return count + PortableKernels().velocity_accumulate_and_collect(
                     g + i, momentum, zero_non_finite, u + i, r + i, n - i,
                     threshold, first + static_cast<uint32_t>(i), out + count,
                     values + count, non_finite);
}

size_t CollectAtLeast(const float* x, size_t n, float threshold, uint32_t first,
                      uint32_t* out) {
  const __m256 t = _mm256_set1_ps(threshold);
  size_t count = 0;
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    const unsigned mask = AtLeast(_mm256_loadu_ps(x + i), t) |
                          (AtLeast(_mm256_loadu_ps(x + i + 8), t) << 8) |
                          (AtLeast(_mm256_loadu_ps(x + i + 16), t) << 16) |
                          (AtLeast(_mm256_loadu_ps(x + i + 24), t) << 24);
    if (mask != 0) {
      count += Emit(mask, first + static_cast<uint32_t>(i), out + count);
    }
  }
  return count + PortableKernels().collect_at_least(
                     x + i, n - i, threshold, first + static_cast<uint32_t>(i),
                     out + count);
}

size_t DifferenceAndCollect(const float* a, const float* b, size_t n,
                            float threshold, uint32_t first, uint32_t* out,
                            float* values) {
  const __m256 t = _mm256_set1_ps(threshold);
  size_t count = 0;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256 v0 =
        _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 v1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + kLanes),
                                    _mm256_loadu_ps(b + i + kLanes));
    const unsigned mask = NotBelow(v0, t) | (NotBelow(v1, t) << kLanes);
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

// See kernels_avx512.cc: saturate like FloatToHalfBits, then convert.
inline __m256 RoundFp16(__m256 v) {
  const __m256 max = _mm256_set1_ps(kFp16Max);
  const __m256 clamped = _mm256_max_ps(_mm256_min_ps(v, max),
                                       _mm256_sub_ps(_mm256_setzero_ps(), max));
  return _mm256_cvtph_ps(
      _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __m256 RoundBf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i odd =
      _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd);
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  const __m256i overflow =
      _mm256_cmpeq_epi32(_mm256_and_si256(rounded, exponent), exponent);
  const __m256i truncated = _mm256_and_si256(
      rounded, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m256i saturated = _mm256_or_si256(
      _mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0x80000000u))),
      _mm256_set1_epi32(0x7f7f0000));
  return _mm256_castsi256_ps(
      _mm256_blendv_epi8(truncated, saturated, overflow));
}

inline __m256 RoundFinite(__m256 v, ValuePrecision precision) {
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
    const __m256 r_old = _mm256_loadu_ps(r + i);
    const __m256 v = _mm256_add_ps(
        r_old, Sanitized(_mm256_loadu_ps(g + i), zero_non_finite));
    if (!AllFinite(v)) {
      float lanes[kLanes];
      finite &= portable.dense_feedback(g + i, zero_non_finite, precision,
                                        r + i, kLanes, lanes);
      StoreValues(values, i, _mm256_loadu_ps(lanes), stream);
      continue;
    }
    const __m256 q = RoundFinite(v, precision);
    StoreValues(values, i, q, stream);
    const __m256 r_new = _mm256_sub_ps(v, q);
    const __m256i same = _mm256_cmpeq_epi32(_mm256_castps_si256(r_new),
                                            _mm256_castps_si256(r_old));
    if (_mm256_movemask_epi8(same) != -1) _mm256_storeu_ps(r + i, r_new);
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
    const __m256 v = Sanitized(_mm256_loadu_ps(x + i), zero_non_finite);
    if (!AllFinite(v)) {
      float lanes[kLanes];
      portable.round_dense(x + i, zero_non_finite, precision, kLanes, lanes);
      StoreValues(values, i, _mm256_loadu_ps(lanes), stream);
      continue;
    }
    StoreValues(values, i, RoundFinite(v, precision), stream);
  }
  if (stream) _mm_sfence();
  portable.round_dense(x + i, zero_non_finite, precision, n - i, values + i);
}

// Sums run in four registers of four doubles: lanes 0-3, 4-7, 8-11, 12-15.
struct LaneSums {
  __m256d part[4];
  explicit LaneSums(const double* lanes) {
    for (int k = 0; k < 4; ++k) part[k] = _mm256_loadu_pd(lanes + 4 * k);
  }
  void StoreTo(double* lanes) const {
    for (int k = 0; k < 4; ++k) _mm256_storeu_pd(lanes + 4 * k, part[k]);
  }
  // Adds the 16 doubles of x[0..16) (f applied) lane by lane.
  void Add(__m256 lo, __m256 hi) {
    part[0] =
        _mm256_add_pd(part[0], _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
    part[1] =
        _mm256_add_pd(part[1], _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
    part[2] =
        _mm256_add_pd(part[2], _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
    part[3] =
        _mm256_add_pd(part[3], _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
  }
  void AddSquares(__m256 lo, __m256 hi) {
    const __m256d d[4] = {_mm256_cvtps_pd(_mm256_castps256_ps128(lo)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)),
                          _mm256_cvtps_pd(_mm256_castps256_ps128(hi)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1))};
    for (int k = 0; k < 4; ++k) {
      part[k] = _mm256_add_pd(part[k], _mm256_mul_pd(d[k], d[k]));
    }
  }
};

void SignBits(const float* x, bool zero_non_finite, size_t n, uint64_t* bits,
              double lanes[kSumLanes]) {
  LaneSums sums(lanes);
  const __m256 zero = _mm256_setzero_ps();
  size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    uint64_t word = 0;
    for (size_t part = 0; part < 4; ++part) {
      const float* p = x + w * 64 + part * 16;
      const __m256 lo = Sanitized(_mm256_loadu_ps(p), zero_non_finite);
      const __m256 hi = Sanitized(_mm256_loadu_ps(p + 8), zero_non_finite);
      sums.Add(Abs(lo), Abs(hi));
      const auto positive = static_cast<uint64_t>(
          _mm256_movemask_ps(_mm256_cmp_ps(lo, zero, _CMP_GE_OQ)) |
          (_mm256_movemask_ps(_mm256_cmp_ps(hi, zero, _CMP_GE_OQ)) << 8));
      word |= positive << (part * 16);
    }
    bits[w] = word;
  }
  sums.StoreTo(lanes);
  PortableKernels().sign_bits(x + w * 64, zero_non_finite, n - w * 64, bits + w,
                              lanes);
}

void SumSquares(const float* x, bool zero_non_finite, size_t n,
                double lanes[kSumLanes]) {
  LaneSums sums(lanes);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    sums.AddSquares(Sanitized(_mm256_loadu_ps(x + i), zero_non_finite),
                    Sanitized(_mm256_loadu_ps(x + i + 8), zero_non_finite));
  }
  sums.StoreTo(lanes);
  PortableKernels().sum_squares(x + i, zero_non_finite, n - i, lanes);
}

bool AccumulateSign(const float* g, bool zero_non_finite, float* r, size_t n,
                    uint64_t* bits, double lanes[kSumLanes]) {
  LaneSums sums(lanes);
  const __m256 zero = _mm256_setzero_ps();
  bool finite = true;
  size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    uint64_t word = 0;
    for (size_t part = 0; part < 4; ++part) {
      const size_t i = w * 64 + part * 16;
      const __m256 v0 =
          _mm256_add_ps(_mm256_loadu_ps(r + i),
                        Sanitized(_mm256_loadu_ps(g + i), zero_non_finite));
      const __m256 v1 =
          _mm256_add_ps(_mm256_loadu_ps(r + i + 8),
                        Sanitized(_mm256_loadu_ps(g + i + 8), zero_non_finite));
      _mm256_storeu_ps(r + i, v0);
      _mm256_storeu_ps(r + i + 8, v1);
      finite = finite && AllFinite(v0) && AllFinite(v1);
      const __m256 k0 = Sanitized(v0, zero_non_finite);
      const __m256 k1 = Sanitized(v1, zero_non_finite);
      sums.Add(Abs(k0), Abs(k1));
      const auto positive = static_cast<uint64_t>(
          _mm256_movemask_ps(_mm256_cmp_ps(k0, zero, _CMP_GE_OQ)) |
          (_mm256_movemask_ps(_mm256_cmp_ps(k1, zero, _CMP_GE_OQ)) << 8));
      word |= positive << (part * 16);
    }
    bits[w] = word;
  }
  sums.StoreTo(lanes);
  const size_t done = w * 64;
  return PortableKernels().accumulate_sign(g + done, zero_non_finite, r + done,
                                           n - done, bits + w, lanes) &&
         finite;
}

void SubtractSign(const uint64_t* bits, float scale, float* r, size_t n) {
  const __m256 plus = _mm256_set1_ps(scale);
  const __m256 minus = _mm256_set1_ps(-scale);
  // Lane k of `select` holds bit k: a per-lane test of the mask byte.
  const __m256i select = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const auto byte = static_cast<int>((bits[i >> 6] >> (i & 63)) & 0xffu);
    const __m256i set = _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32(byte), select), select);
    const __m256 decoded =
        _mm256_blendv_ps(minus, plus, _mm256_castsi256_ps(set));
    _mm256_storeu_ps(r + i, _mm256_sub_ps(_mm256_loadu_ps(r + i), decoded));
  }
  for (; i < n; ++i) {
    r[i] -= ((bits[i >> 6] >> (i & 63)) & 1u) ? scale : -scale;
  }
}

bool AccumulateSquares(const float* g, bool zero_non_finite, float* r, size_t n,
                       double lanes[kSumLanes]) {
  LaneSums sums(lanes);
  bool finite = true;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 =
        _mm256_add_ps(_mm256_loadu_ps(r + i),
                      Sanitized(_mm256_loadu_ps(g + i), zero_non_finite));
    const __m256 v1 =
        _mm256_add_ps(_mm256_loadu_ps(r + i + 8),
                      Sanitized(_mm256_loadu_ps(g + i + 8), zero_non_finite));
    _mm256_storeu_ps(r + i, v0);
    _mm256_storeu_ps(r + i + 8, v1);
    finite = finite && AllFinite(v0) && AllFinite(v1);
    sums.AddSquares(Sanitized(v0, zero_non_finite),
                    Sanitized(v1, zero_non_finite));
  }
  sums.StoreTo(lanes);
  return PortableKernels().accumulate_squares(g + i, zero_non_finite, r + i,
                                              n - i, lanes) &&
         finite;
}

// No 64-bit multiply in AVX2: QSGD's generator runs the portable way.
void QsgdLevels(const float* x, bool zero_non_finite, size_t n,
                double to_levels, float s, uint64_t seed, uint16_t* levels,
                uint64_t* negative_bits) {
  PortableKernels().qsgd_levels(x, zero_non_finite, n, to_levels, s, seed,
                                levels, negative_bits);
}

void QsgdFeedback(float* r, bool zero_non_finite, size_t n, double to_levels,
                  float s, float norm, uint64_t seed, uint16_t* levels,
                  uint64_t* negative_bits) {
  PortableKernels().qsgd_feedback(r, zero_non_finite, n, to_levels, s, norm,
                                  seed, levels, negative_bits);
}

void HalfToFloat(const uint8_t* src, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
  PortableKernels().half_to_float(src + 2 * i, n - i, out + i);
}

// As the AVX-512 version: clamp finite values to +-65504, portable blocks
// for NaN and infinity.
void FloatToHalf(const float* in, size_t n, uint8_t* dst) {
  const __m256 limit = _mm256_set1_ps(65504.0f);
  const __m256 negative_limit = _mm256_set1_ps(-65504.0f);
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m256 magnitude_mask =
      _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    const __m256 beyond =
        _mm256_cmp_ps(_mm256_and_ps(v, magnitude_mask), largest, _CMP_NLE_UQ);
    if (_mm256_movemask_ps(beyond) != 0) {
      PortableKernels().float_to_half(in + i, 8, dst + 2 * i);
      continue;
    }
    const __m256 clamped =
        _mm256_min_ps(_mm256_max_ps(v, negative_limit), limit);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT |
                                                  _MM_FROUND_NO_EXC));
  }
  PortableKernels().float_to_half(in + i, n - i, dst + 2 * i);
}

bool AllFiniteVectors(const float* x, size_t n) {
  // As the AVX-512 version: the largest exponent field per lane.
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    const auto load = [&](size_t at) {
      return _mm256_and_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + at)),
          exponent);
    };
    m0 = _mm256_max_epu32(m0, load(i));
    m1 = _mm256_max_epu32(m1, load(i + 8));
    m2 = _mm256_max_epu32(m2, load(i + 16));
    m3 = _mm256_max_epu32(m3, load(i + 24));
  }
  const __m256i m =
      _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
  return _mm256_movemask_epi8(_mm256_cmpeq_epi32(m, exponent)) == 0 &&
         PortableKernels().all_finite(x + i, n - i);
}

constexpr KernelTable kAvx2 = {
    InstructionSet::kAvx2,
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

const KernelTable* Avx2Kernels() { return &kAvx2; }

}  // namespace compress_kernels
}  // namespace gradwire
