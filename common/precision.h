// Value precisions on the wire and exact conversions between them.
//
// Compressors round the values they select to the precision that will travel,
// so that what the receiver decodes is exactly what the sender subtracted from
// its error-feedback residual. The codec then converts without further loss.
#ifndef GRADWIRE_COMMON_PRECISION_H_
#define GRADWIRE_COMMON_PRECISION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gradwire {

enum class ValuePrecision { kFp32, kFp16, kBf16 };

// Bytes one value takes on the wire.
constexpr size_t BytesPerValue(ValuePrecision p) {
  return p == ValuePrecision::kFp32 ? 4 : 2;
}

// "fp32", "fp16", "bf16".
absl::string_view PrecisionName(ValuePrecision p);
// Inverse of PrecisionName; nullopt for an unknown name.
absl::optional<ValuePrecision> ParsePrecision(absl::string_view name);

// Largest finite fp16 value. Conversions saturate to it instead of producing
// infinities, so a large gradient is clipped and its excess stays in the
// error-feedback residual.
inline constexpr float kFp16Max = 65504.0f;

// float -> IEEE binary16 bits, round to nearest even, saturating finite
// values to +-kFp16Max. NaN stays NaN.
uint16_t FloatToHalfBits(float f);
// The bit pattern of a float.
inline uint32_t BitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
// IEEE binary16 bits -> float (exact). Inline: decoders call it per value.
inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  } else {
    const float sub = static_cast<float>(mant) * (1.0f / 16777216.0f);
    out = sign | BitsOfFloat(sub);
  }
  float f;
  std::memcpy(&f, &out, sizeof f);
  return f;
}

// float -> bfloat16 bits, round to nearest even, saturating finite values to
// the largest finite bfloat16. NaN stays NaN.
uint16_t FloatToBf16Bits(float f);
// bfloat16 bits -> float (exact).
inline float Bf16BitsToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds `f` to the nearest value representable in `p` (identity for fp32).
inline float RoundToPrecision(float f, ValuePrecision p) {
  switch (p) {
    case ValuePrecision::kFp16:
      return HalfBitsToFloat(FloatToHalfBits(f));
    case ValuePrecision::kBf16:
      return Bf16BitsToFloat(FloatToBf16Bits(f));
    case ValuePrecision::kFp32:
      break;
  }
  return f;
}

// Rounds every element of `values` in place.
void RoundAllToPrecision(float* values, size_t n, ValuePrecision p);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_PRECISION_H_
