// The portable kernels: the reference every vector version must match.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/compress/kernels.h"
#include "common/compress/random_index_set.h"

namespace gradwire {
namespace compress_kernels {
namespace {

// Almost all blocks hold no selected element at the densities we run, so a
// branch-free test of a whole block comes first.
constexpr size_t kBlock = 16;

inline float Sanitized(float x, bool zero_non_finite) {
  return (zero_non_finite && !(x - x == 0.0f)) ? 0.0f : x;
}

size_t AccumulateAndCollect(const float* g, float scale, bool zero_non_finite,
                            const float* r, float* r_out, size_t n,
                            float threshold, uint32_t first, uint32_t* out,
                            float* values, bool* non_finite) {
  size_t count = 0;
  size_t i = 0;
  bool finite = true;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      const float product = scale * Sanitized(g[i + j], zero_non_finite);
      const float v = r[i + j] + product;
      r_out[i + j] = v;
      any |= std::fabs(v) >= threshold;
      finite &= v - v == 0.0f;
    }
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (std::fabs(r_out[i + j]) >= threshold) {
        values[count] = r_out[i + j];
        out[count++] = first + static_cast<uint32_t>(i + j);
      }
    }
  }
  for (; i < n; ++i) {
    const float product = scale * Sanitized(g[i], zero_non_finite);
    const float v = r[i] + product;
    r_out[i] = v;
    finite &= v - v == 0.0f;
    if (std::fabs(v) >= threshold) {
      values[count] = v;
      out[count++] = first + static_cast<uint32_t>(i);
    }
  }
  if (!finite) *non_finite = true;
  return count;
}

// u' = m * u + g', then the residual's new value (kernels.h).
inline float VelocityStep(const float* g, float m, bool zero_non_finite,
                          float* u, const float* r, size_t i) {
  const float product = m * u[i];
  const float velocity = product + Sanitized(g[i], zero_non_finite);
  u[i] = velocity;
  return r[i] + Sanitized(velocity, zero_non_finite);
}

size_t VelocityAccumulateAndCollect(const float* g, float m,
                                    bool zero_non_finite, float* u, float* r,
                                    size_t n, float threshold, uint32_t first,
                                    uint32_t* out, float* values,
                                    bool* non_finite) {
  size_t count = 0;
  bool finite = true;
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t end = std::min(n, i + kBlock);
    int any = 0;
    for (size_t j = i; j < end; ++j) {
      const float v = VelocityStep(g, m, zero_non_finite, u, r, j);
      r[j] = v;
      any |= std::fabs(v) >= threshold;
      finite &= v - v == 0.0f;
    }
    if (!any) continue;
    for (size_t j = i; j < end; ++j) {
      if (std::fabs(r[j]) >= threshold) {
        values[count] = r[j];
        out[count++] = first + static_cast<uint32_t>(j);
      }
    }
  }
  if (!finite) *non_finite = true;
  return count;
}

size_t CollectAtLeast(const float* x, size_t n, float threshold, uint32_t first,
                      uint32_t* out) {
  size_t count = 0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) any |= std::fabs(x[i + j]) >= threshold;
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (std::fabs(x[i + j]) >= threshold) {
        out[count++] = first + static_cast<uint32_t>(i + j);
      }
    }
  }
  for (; i < n; ++i) {
    if (std::fabs(x[i]) >= threshold) {
      out[count++] = first + static_cast<uint32_t>(i);
    }
  }
  return count;
}

size_t DifferenceAndCollect(const float* a, const float* b, size_t n,
                            float threshold, uint32_t first, uint32_t* out,
                            float* values) {
  size_t count = 0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      any |= !(std::fabs(a[i + j] - b[i + j]) < threshold);
    }
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      const float v = a[i + j] - b[i + j];
      if (!(std::fabs(v) < threshold)) {
        values[count] = v;
        out[count++] = first + static_cast<uint32_t>(i + j);
      }
    }
  }
  for (; i < n; ++i) {
    const float v = a[i] - b[i];
    if (!(std::fabs(v) < threshold)) {
      values[count] = v;
      out[count++] = first + static_cast<uint32_t>(i);
    }
  }
  return count;
}

bool DenseFeedback(const float* g, bool zero_non_finite,
                   ValuePrecision precision, float* r, size_t n,
                   float* values) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    const float v = r[i] + Sanitized(g[i], zero_non_finite);
    finite &= v - v == 0.0f;
    const float q = RoundToPrecision(v, precision);
    values[i] = q;
    r[i] = v - q;
  }
  return finite;
}

void RoundDense(const float* x, bool zero_non_finite, ValuePrecision precision,
                size_t n, float* values) {
  for (size_t i = 0; i < n; ++i) {
    values[i] = RoundToPrecision(Sanitized(x[i], zero_non_finite), precision);
  }
}

void SignBits(const float* x, bool zero_non_finite, size_t n, uint64_t* bits,
              double lanes[kSumLanes]) {
  for (size_t w = 0; w * 64 < n; ++w) {
    uint64_t word = 0;
    const size_t end = std::min<size_t>(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      const float v = Sanitized(x[i], zero_non_finite);
      lanes[i % kSumLanes] += std::fabs(v);
      if (v >= 0.0f) word |= uint64_t{1} << (i & 63);
    }
    bits[w] = word;
  }
}

void SumSquares(const float* x, bool zero_non_finite, size_t n,
                double lanes[kSumLanes]) {
  for (size_t i = 0; i < n; ++i) {
    const double v = Sanitized(x[i], zero_non_finite);
    lanes[i % kSumLanes] += v * v;
  }
}

void QsgdLevels(const float* x, bool zero_non_finite, size_t n,
                double to_levels, float s, uint64_t seed, uint16_t* levels,
                uint64_t* negative_bits) {
  SplitMix64 rng(seed);
  for (size_t w = 0; w * 64 < n; ++w) {
    uint64_t word = 0;
    const size_t end = std::min<size_t>(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      const float v = Sanitized(x[i], zero_non_finite);
      const float a =
          static_cast<float>(std::min(std::fabs(v) * to_levels, double{s}));
      const float low = std::floor(a);
      // Round up with probability a - low: E[level] = a.
      const bool up = rng.NextUnitFloat() < a - low;
      levels[i] = static_cast<uint16_t>(static_cast<uint32_t>(low) + up);
      if (v < 0.0f) word |= uint64_t{1} << (i & 63);
    }
    negative_bits[w] = word;
  }
}

bool AccumulateSign(const float* g, bool zero_non_finite, float* r, size_t n,
                    uint64_t* bits, double lanes[kSumLanes]) {
  bool finite = true;
  for (size_t w = 0; w * 64 < n; ++w) {
    uint64_t word = 0;
    const size_t end = std::min<size_t>(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      const float v = r[i] + Sanitized(g[i], zero_non_finite);
      r[i] = v;
      finite &= v - v == 0.0f;
      const float kept = Sanitized(v, zero_non_finite);
      lanes[i % kSumLanes] += std::fabs(kept);
      if (kept >= 0.0f) word |= uint64_t{1} << (i & 63);
    }
    bits[w] = word;
  }
  return finite;
}

void SubtractSign(const uint64_t* bits, float scale, float* r, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    r[i] -= ((bits[i >> 6] >> (i & 63)) & 1u) ? scale : -scale;
  }
}

bool AccumulateSquares(const float* g, bool zero_non_finite, float* r, size_t n,
                       double lanes[kSumLanes]) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    const float v = r[i] + Sanitized(g[i], zero_non_finite);
    r[i] = v;
    finite &= v - v == 0.0f;
    const double kept = Sanitized(v, zero_non_finite);
    lanes[i % kSumLanes] += kept * kept;
  }
  return finite;
}

void QsgdFeedback(float* r, bool zero_non_finite, size_t n, double to_levels,
                  float s, float norm, uint64_t seed, uint16_t* levels,
                  uint64_t* negative_bits) {
  QsgdLevels(r, zero_non_finite, n, to_levels, s, seed, levels, negative_bits);
  for (size_t i = 0; i < n; ++i) {
    // As the decoder computes it (compressed_chunk.cc).
    const float magnitude =
        norm * (static_cast<float>(levels[i]) / static_cast<float>(s));
    r[i] -= ((negative_bits[i >> 6] >> (i & 63)) & 1u) ? -magnitude : magnitude;
  }
}

void HalfToFloat(const uint8_t* src, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const auto bits = static_cast<uint16_t>(src[2 * i] | src[2 * i + 1] << 8);
    out[i] = HalfBitsToFloat(bits);
  }
}

void FloatToHalf(const float* in, size_t n, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t bits = FloatToHalfBits(in[i]);
    dst[2 * i] = static_cast<uint8_t>(bits);
    dst[2 * i + 1] = static_cast<uint8_t>(bits >> 8);
  }
}

bool AllFinite(const float* x, size_t n) {
  // By the exponent bits, so that the loop vectorises without fast-math.
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad == 0;
}

constexpr KernelTable kPortable = {
    InstructionSet::kPortable,
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
    AllFinite,
};

}  // namespace

const KernelTable& PortableKernels() { return kPortable; }

}  // namespace compress_kernels
}  // namespace gradwire
