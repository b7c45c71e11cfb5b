// The wire-precision conversions of common/precision.h for device code.
//
// The same bit-level algorithms, so that a value rounded on the device is
// bit for bit what the CPU compressors send: round to nearest even, finite
// values saturate (fp16 at +-65504, not the hardware conversion's infinity),
// NaN stays NaN. tests/common/cuda/device_compressor_test.cc compares them over
// many bit patterns.
#ifndef GRADWIRE_COMMON_CUDA_DEVICE_PRECISION_CUH_
#define GRADWIRE_COMMON_CUDA_DEVICE_PRECISION_CUH_

#include <cstdint>

#include "common/cuda/kernels.h"

namespace gradwire {
namespace cuda_internal {

__device__ __forceinline__ uint16_t FloatToHalfBits(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs == 0x7f800000u) return sign | 0x7c00u;  // infinity
  if (abs >= 0x477fe000u) return sign | 0x7bffu;  // rounds past 65504
  if (abs < 0x38800000u) {
    // Subnormal or zero: |f| * 2^24 is exact; rintf rounds to nearest even.
    return sign | static_cast<uint16_t>(rintf(fabsf(f) * 16777216.0f));
  }
  const uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t lower = rebased & 0x1fffu;
  uint32_t half = rebased >> 13;
  if (lower > 0x1000u || (lower == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0)
    return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
  const float sub = static_cast<float>(mant) * (1.0f / 16777216.0f);
  return __uint_as_float(sign | __float_as_uint(sub));
}

__device__ __forceinline__ uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  if (abs == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  if ((rounded & 0x7f800000u) == 0x7f800000u) {
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7f7fu);
  }
  return static_cast<uint16_t>(rounded >> 16);
}

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// The 16-bit pattern of f in `p` (fp16 or bf16).
__device__ __forceinline__ uint16_t ToBits16(float f, Precision p) {
  return p == Precision::kFp16 ? FloatToHalfBits(f) : FloatToBf16Bits(f);
}

__device__ __forceinline__ float FromBits16(uint16_t b, Precision p) {
  return p == Precision::kFp16 ? HalfBitsToFloat(b) : Bf16BitsToFloat(b);
}

// f rounded to the nearest value representable in `p`.
__device__ __forceinline__ float RoundToPrecision(float f, Precision p) {
  return p == Precision::kFp32 ? f : FromBits16(ToBits16(f, p), p);
}

}  // namespace cuda_internal
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CUDA_DEVICE_PRECISION_CUH_
