#include "common/precision.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t ToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

bool IsHalfNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
bool IsBf16Nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu); }

// The value of binary16 bits `h`, computed independently of the code under
// test (in double).
double HalfValue(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant ? std::numeric_limits<double>::quiet_NaN()
             : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

// Reference float -> fp16: the nearest finite half (ties to the even bit
// pattern), saturating to 65504; infinities stay infinite.
uint16_t ReferenceHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7c00u;
  if (a >= 65504.0) return sign | 0x7bffu;
  // Positive finite halves 0x0000..0x7bff increase with their bit pattern.
  uint16_t lo = 0, hi = 0x7bff;
  while (hi - lo > 1) {  // invariant: HalfValue(lo) <= a < HalfValue(hi)
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (HalfValue(mid) <= a) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (HalfValue(hi) <= a) lo = hi;
  if (HalfValue(lo) == a) return sign | lo;
  const double dlo = a - HalfValue(lo);
  const double dhi = HalfValue(lo + 1) - a;
  uint16_t pick;
  if (dlo < dhi) {
    pick = lo;
  } else if (dhi < dlo) {
    pick = lo + 1;
  } else {
    pick = (lo & 1u) ? lo + 1 : lo;
  }
  return sign | pick;
}

// Reference float -> bf16: nearest of the two bf16 values around f (ties to
// even), saturating to the largest finite bf16.
uint16_t ReferenceBf16(float f) {
  const uint32_t x = ToBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
  const uint16_t lo = static_cast<uint16_t>(abs >> 16);  // truncated
  const double a = std::fabs(static_cast<double>(f));
  const double vlo = FromBits(static_cast<uint32_t>(lo) << 16);
  if (vlo == a) return sign | lo;
  const uint16_t up = lo + 1;
  // The value just above lo; 0x7f80 is infinity, whose "distance" uses 2^128.
  const double vhi =
      up == 0x7f80u
          ? std::ldexp(1.0, 128)
          : static_cast<double>(FromBits(static_cast<uint32_t>(up) << 16));
  uint16_t pick;
  if (a - vlo < vhi - a) {
    pick = lo;
  } else if (vhi - a < a - vlo) {
    pick = up;
  } else {
    pick = (lo & 1u) ? up : lo;
  }
  if (pick == 0x7f80u) pick = 0x7f7fu;  // saturate
  return sign | pick;
}

TEST(PrecisionTest, NamesRoundTrip) {
  for (ValuePrecision p :
       {ValuePrecision::kFp32, ValuePrecision::kFp16, ValuePrecision::kBf16}) {
    const auto parsed = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(parsed.has_value()) << PrecisionName(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(PrecisionName(ValuePrecision::kFp32), "fp32");
  EXPECT_EQ(PrecisionName(ValuePrecision::kFp16), "fp16");
  EXPECT_EQ(PrecisionName(ValuePrecision::kBf16), "bf16");
  EXPECT_FALSE(ParsePrecision("fp8").has_value());
  EXPECT_FALSE(ParsePrecision("").has_value());
  EXPECT_FALSE(ParsePrecision("FP16").has_value());
  EXPECT_EQ(BytesPerValue(ValuePrecision::kFp32), 4u);
  EXPECT_EQ(BytesPerValue(ValuePrecision::kFp16), 2u);
  EXPECT_EQ(BytesPerValue(ValuePrecision::kBf16), 2u);
}

TEST(PrecisionTest, HalfDecodesEveryPatternExactly) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double want = HalfValue(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << absl::StrFormat("h=0x%04x", h);
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << absl::StrFormat("h=0x%04x", h);
      EXPECT_EQ(std::signbit(f), (h & 0x8000u) != 0)
          << absl::StrFormat("h=0x%04x", h);
    }
  }
}

TEST(PrecisionTest, HalfRoundTripsEveryPattern) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = HalfBitsToFloat(bits);
    const uint16_t back = FloatToHalfBits(f);
    if (IsHalfNan(bits)) {
      EXPECT_TRUE(IsHalfNan(back)) << absl::StrFormat("h=0x%04x", h);
      EXPECT_EQ(back & 0x8000u, bits & 0x8000u);
    } else {
      EXPECT_EQ(back, bits) << absl::StrFormat("h=0x%04x", h);
    }
  }
}

// Every midpoint between adjacent halves (exact in float) and its two float
// neighbours: the places where rounding decisions happen.
TEST(PrecisionTest, HalfRoundsLikeReferenceAroundEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7bffu; ++h) {
    const float lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float hi = HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, std::numeric_limits<float>::max())}) {
      for (float s : {f, -f}) {
        ASSERT_EQ(FloatToHalfBits(s), ReferenceHalf(s))
            << absl::StrFormat("f=%a", s);
      }
    }
  }
}

TEST(PrecisionTest, HalfRoundsLikeReferenceOnRandomFloats) {
  std::mt19937 rng(1);
  for (int i = 0; i < 300000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    const float f = FromBits(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalfBits(f), ReferenceHalf(f))
        << absl::StrFormat("f=%a bits=0x%08x", f, bits);
  }
  // Floats in the fp16 range, where the interesting cases are dense.
  std::uniform_real_distribution<float> magnitude(-26.0f, 17.0f);
  for (int i = 0; i < 300000; ++i) {
    const float f = std::exp2(magnitude(rng)) * ((i & 1) ? -1.0f : 1.0f);
    ASSERT_EQ(FloatToHalfBits(f), ReferenceHalf(f)) << absl::StrFormat("%a", f);
  }
}

TEST(PrecisionTest, HalfSpotChecks) {
  const float one = 1.0f;
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(FloatToHalfBits(one + std::ldexp(1.0f, -11)), 0x3c00u);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToHalfBits(one + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
  EXPECT_EQ(HalfBitsToFloat(0x3c02u), one + std::ldexp(1.0f, -9));
  // Just above the tie rounds up.
  EXPECT_EQ(FloatToHalfBits(std::nextafter(one + std::ldexp(1.0f, -11), 2.0f)),
            0x3c01u);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00u);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000u);
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000u);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000u);

  // Saturation: everything at or above 65504 becomes 65504, never infinity.
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalfBits(1e10f), 0x7bffu);
  EXPECT_EQ(FloatToHalfBits(-1e10f), 0xfbffu);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::max()), 0x7bffu);
  EXPECT_EQ(HalfBitsToFloat(0x7bffu), kFp16Max);
  EXPECT_EQ(RoundToPrecision(65519.0f, ValuePrecision::kFp16), 65504.0f);
  EXPECT_EQ(RoundToPrecision(-70000.0f, ValuePrecision::kFp16), -65504.0f);
  // 65503 is between 65472 and 65504, nearer 65504.
  EXPECT_EQ(RoundToPrecision(65503.0f, ValuePrecision::kFp16), 65504.0f);
  EXPECT_EQ(RoundToPrecision(65487.0f, ValuePrecision::kFp16), 65472.0f);

  // Infinities stay infinite; NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToHalfBits(inf), 0x7c00u);
  EXPECT_EQ(FloatToHalfBits(-inf), 0xfc00u);
  EXPECT_EQ(HalfBitsToFloat(0x7c00u), inf);
  EXPECT_EQ(HalfBitsToFloat(0xfc00u), -inf);
  EXPECT_TRUE(IsHalfNan(FloatToHalfBits(std::nanf(""))));
  EXPECT_TRUE(IsHalfNan(FloatToHalfBits(-std::nanf(""))));
  EXPECT_TRUE(
      std::isnan(RoundToPrecision(std::nanf(""), ValuePrecision::kFp16)));
  EXPECT_EQ(RoundToPrecision(inf, ValuePrecision::kFp16), inf);

  // Subnormals: the smallest is 2^-24; 2^-25 ties to 0 (even), 3 * 2^-25
  // ties to 2 * 2^-24 (even), 1.5 * 2^-25 rounds up to 2^-24.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(FloatToHalfBits(-std::ldexp(1.0f, -25)), 0x8000u);
  EXPECT_EQ(FloatToHalfBits(3 * std::ldexp(1.0f, -25)), 0x0002u);
  EXPECT_EQ(FloatToHalfBits(1.5f * std::ldexp(1.0f, -25)), 0x0001u);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400u);  // min normal
  EXPECT_EQ(FloatToHalfBits(1023 * std::ldexp(1.0f, -24)), 0x03ffu);
  // Just below the smallest normal rounds up into it.
  EXPECT_EQ(FloatToHalfBits(std::nextafter(std::ldexp(1.0f, -14), 0.0f)),
            0x0400u);
  EXPECT_EQ(HalfBitsToFloat(0x0001u), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfBitsToFloat(0x8001u), -std::ldexp(1.0f, -24));
  // Float subnormals are far below fp16's range.
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::denorm_min()), 0u);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::denorm_min()),
            0x8000u);
}

TEST(PrecisionTest, Bf16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = Bf16BitsToFloat(bits);
    EXPECT_EQ(ToBits(f), static_cast<uint32_t>(b) << 16);
    const uint16_t back = FloatToBf16Bits(f);
    if (IsBf16Nan(bits)) {
      EXPECT_TRUE(IsBf16Nan(back)) << absl::StrFormat("b=0x%04x", b);
      EXPECT_EQ(back & 0x8000u, bits & 0x8000u);
    } else {
      EXPECT_EQ(back, bits) << absl::StrFormat("b=0x%04x", b);
    }
  }
}

TEST(PrecisionTest, Bf16RoundsLikeReference) {
  // Midpoints between adjacent bf16 values and their neighbours.
  for (uint32_t b = 0; b < 0x7f7fu; ++b) {
    const uint32_t mid = (b << 16) | 0x8000u;
    for (uint32_t bits : {mid, mid - 1, mid + 1}) {
      for (uint32_t s : {bits, bits | 0x80000000u}) {
        const float f = FromBits(s);
        ASSERT_EQ(FloatToBf16Bits(f), ReferenceBf16(f))
            << absl::StrFormat("bits=0x%08x", s);
      }
    }
  }
  std::mt19937 rng(2);
  for (int i = 0; i < 300000; ++i) {
    const float f = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16Bits(f), ReferenceBf16(f)) << absl::StrFormat("%a", f);
  }
}

TEST(PrecisionTest, Bf16SpotChecks) {
  const float one = 1.0f;
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 ties to 1 (even), 1 + 3 * 2^-8 ties
  // up to 1 + 2^-6 (even).
  EXPECT_EQ(FloatToBf16Bits(one + std::ldexp(1.0f, -8)), 0x3f80u);
  EXPECT_EQ(FloatToBf16Bits(one + 3 * std::ldexp(1.0f, -8)), 0x3f82u);
  EXPECT_EQ(FloatToBf16Bits(std::nextafter(one + std::ldexp(1.0f, -8), 2.0f)),
            0x3f81u);
  EXPECT_EQ(
      RoundToPrecision(one + 3 * std::ldexp(1.0f, -8), ValuePrecision::kBf16),
      one + std::ldexp(1.0f, -6));
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80u);
  EXPECT_EQ(FloatToBf16Bits(-0.0f), 0x8000u);
  // pi = 0x40490fdb: the dropped half 0x0fdb is below the tie.
  EXPECT_EQ(FloatToBf16Bits(3.14159265f), 0x4049u);
  // Saturation to the largest finite bf16 (0x7f7f), never infinity.
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::max()), 0x7f7fu);
  EXPECT_EQ(FloatToBf16Bits(-std::numeric_limits<float>::max()), 0xff7fu);
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x7f7f8000u)), 0x7f7fu);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16Bits(inf), 0x7f80u);
  EXPECT_EQ(FloatToBf16Bits(-inf), 0xff80u);
  EXPECT_TRUE(IsBf16Nan(FloatToBf16Bits(std::nanf(""))));
  // A signalling NaN whose payload lives only in the dropped bits must not
  // become infinity.
  EXPECT_TRUE(IsBf16Nan(FloatToBf16Bits(FromBits(0x7f800001u))));
  EXPECT_TRUE(IsBf16Nan(FloatToBf16Bits(FromBits(0xff800001u))));
  EXPECT_TRUE(
      std::isnan(RoundToPrecision(std::nanf(""), ValuePrecision::kBf16)));
  // Float subnormals survive (bf16 has float's exponent range).
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x00010000u)), 0x0001u);
}

TEST(PrecisionTest, RoundToPrecisionIsIdempotentAndFp32IsIdentity) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const float f = normal(rng);
    EXPECT_EQ(RoundToPrecision(f, ValuePrecision::kFp32), f);
    for (ValuePrecision p : {ValuePrecision::kFp16, ValuePrecision::kBf16}) {
      const float r = RoundToPrecision(f, p);
      EXPECT_EQ(RoundToPrecision(r, p), r);
      // Rounding error at most half a unit in the last place.
      const int mantissa_bits = p == ValuePrecision::kFp16 ? 10 : 7;
      EXPECT_LE(std::fabs(r - f), std::ldexp(std::fabs(f), -mantissa_bits) / 2 +
                                      std::ldexp(1.0f, -25));
    }
  }
}

TEST(PrecisionTest, RoundAllToPrecisionRoundsEachElement) {
  std::vector<float> v = {1.0f + std::ldexp(1.0f, -11), 65519.0f, -3.0f,
                          1.0f + 3 * std::ldexp(1.0f, -11)};
  std::vector<float> want;
  for (float f : v) want.push_back(RoundToPrecision(f, ValuePrecision::kFp16));
  RoundAllToPrecision(v.data(), v.size(), ValuePrecision::kFp16);
  EXPECT_EQ(v, want);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 65504.0f);

  std::vector<float> same = {0.1f, 0.2f};
  RoundAllToPrecision(same.data(), same.size(), ValuePrecision::kFp32);
  EXPECT_EQ(same[0], 0.1f);
  EXPECT_EQ(same[1], 0.2f);
  RoundAllToPrecision(same.data(), same.size(), ValuePrecision::kBf16);
  EXPECT_EQ(same[0], Bf16BitsToFloat(FloatToBf16Bits(0.1f)));
  EXPECT_NE(same[0], 0.1f);
}

}  // namespace
}  // namespace gradwire
