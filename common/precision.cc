#include "common/precision.h"

#include <cmath>

namespace gradwire {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace

absl::string_view PrecisionName(ValuePrecision p) {
  switch (p) {
    case ValuePrecision::kFp16:
      return "fp16";
    case ValuePrecision::kBf16:
      return "bf16";
    case ValuePrecision::kFp32:
      break;
  }
  return "fp32";
}

absl::optional<ValuePrecision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return ValuePrecision::kFp32;
  if (name == "fp16") return ValuePrecision::kFp16;
  if (name == "bf16") return ValuePrecision::kBf16;
  return absl::nullopt;
}

uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs == 0x7f800000u) return sign | 0x7c00u;  // infinity
  if (abs >= 0x477fe000u) return sign | 0x7bffu;  // rounds past 65504: saturate
  if (abs < 0x38800000u) {
    // Result is an fp16 subnormal (or zero): scale so that the integer part is
    // the subnormal mantissa, and let the FPU round to nearest even.
    const float scaled = std::fabs(f) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits.
  uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t round_bit = 0x1000u;
  const uint32_t lower = rebased & 0x1fffu;
  uint32_t half = rebased >> 13;
  if (lower > round_bit || (lower == round_bit && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  if (abs == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  if ((rounded & 0x7f800000u) == 0x7f800000u) {
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7f7fu);
  }
  return static_cast<uint16_t>(rounded >> 16);
}

void RoundAllToPrecision(float* values, size_t n, ValuePrecision p) {
  if (p == ValuePrecision::kFp32) return;
  for (size_t i = 0; i < n; ++i) values[i] = RoundToPrecision(values[i], p);
}

}  // namespace gradwire
