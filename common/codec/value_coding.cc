// Values in a precision on the wire: the value-type enum, and arrays of
// fp32 / fp16 / bf16 values written, checked and read.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/config.h"
#include "absl/strings/string_view.h"
#include "common/codec/codec.h"
#include "common/codec/codec_internal.h"
#include "common/compress/kernels.h"
#include "common/vector_clones.h"

namespace gradwire {
namespace codec_internal {
namespace {

// ---------------------------------------------------------------------------
// Little-endian scalars. Byte-wise code that compilers turn into single
// loads and stores on little-endian hosts, and that stays correct elsewhere.
// fp32 arrays are copied wholesale where the host layout is the wire layout.

#ifdef ABSL_IS_LITTLE_ENDIAN
constexpr bool kHostIsLittleEndian = true;
#else
constexpr bool kHostIsLittleEndian = false;
#endif

inline void StoreLE16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void StoreLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t LoadLE16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t LoadLE32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The largest magnitude field (word & magnitude_mask: every bit but the
// sign) of the `n` little-endian words of `Width` bytes at `src`. In the
// IEEE formats the integer order of these fields is the order of |value|,
// and a NaN or infinity has the largest: at least the exponent mask. One
// integer max per element, so that the loop vectorises (a dense 4 MiB
// chunk is checked on every push) and gives both the finite check and the
// largest |value| that the shard's bound needs.
// Inlined into each vector clone below, so that each is built for its width.
template <int Width>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t MaxMagnitudeBits(
    const uint8_t* src, size_t n, uint32_t magnitude_mask) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits =
        Width == 2 ? LoadLE16(src + 2 * i) : LoadLE32(src + 4 * i);
    largest = std::max(largest, bits & magnitude_mask);
  }
  return largest;
}

// Converts `n` values with `load(src, i)`, zeroing non-finite ones under
// kZero.
template <typename Load>
void ConvertValues(const uint8_t* src, size_t n, NonFinitePolicy policy,
                   Load load, float* dst) {
  if (policy == NonFinitePolicy::kZero) {
    for (size_t i = 0; i < n; ++i) dst[i] = SanitizeValue(load(src, i), policy);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = load(src, i);
  }
}

// Calls fn(src, count, first) for each run of whole values of `width` bytes
// in `bytes`, in order: `count` values at `src`, the first being value
// `first` of the array. A value split between two pieces is assembled
// aside and passed as a run of one. Stops when fn returns false.
template <typename Fn>
void ForEachValueRun(const WireBytes& bytes, size_t width, Fn fn) {
  uint8_t split[4];
  size_t split_bytes = 0;
  size_t index = 0;
  for (absl::string_view piece : bytes.pieces()) {
    const uint8_t* src = Bytes(piece);
    size_t left = piece.size();
    if (split_bytes > 0) {
      const size_t take = std::min(width - split_bytes, left);
      std::memcpy(split + split_bytes, src, take);
      split_bytes += take;
      src += take;
      left -= take;
      if (split_bytes < width) continue;
      if (!fn(split, size_t{1}, index)) return;
      ++index;
      split_bytes = 0;
    }
    const size_t whole = left / width;
    if (whole > 0 && !fn(src, whole, index)) return;
    index += whole;
    split_bytes = left - whole * width;
    std::memcpy(split, src + whole * width, split_bytes);
  }
}

}  // namespace

void WriteValues(const std::vector<float>& values, ValuePrecision precision,
                 std::string* out) {
  uint8_t* dst = ResizeBytes(out, values.size() * BytesPerValue(precision));
  const size_t n = values.size();
  if (n == 0) return;
  switch (precision) {
    case ValuePrecision::kFp32:
      if (kHostIsLittleEndian) {
        std::memcpy(dst, values.data(), n * sizeof(float));
        return;
      }
      for (size_t i = 0; i < n; ++i)
        StoreLE32(dst + 4 * i, FloatBits(values[i]));
      return;
    case ValuePrecision::kFp16:
      compress_kernels::Kernels().float_to_half(values.data(), n, dst);
      return;
    case ValuePrecision::kBf16:
      for (size_t i = 0; i < n; ++i)
        StoreLE16(dst + 2 * i, FloatToBf16Bits(values[i]));
      return;
  }
}

float LoadValue(const uint8_t* src, size_t i, ValuePrecision precision) {
  switch (precision) {
    case ValuePrecision::kFp16:
      return HalfBitsToFloat(LoadLE16(src + 2 * i));
    case ValuePrecision::kBf16:
      return Bf16BitsToFloat(LoadLE16(src + 2 * i));
    case ValuePrecision::kFp32:
      break;
  }
  return BitsToFloat(LoadLE32(src + 4 * i));
}

float LoadValue(const WireBytes& bytes, size_t i, ValuePrecision precision) {
  const size_t width = BytesPerValue(precision);
  uint8_t value[4];
  bytes.CopyOut(i * width, width, value);
  return LoadValue(value, 0, precision);
}

absl::Status CheckValueType(absl::string_view what, v1::ValueType value_type,
                            ValuePrecision* precision) {
  const absl::optional<ValuePrecision> resolved = FromWire(value_type);
  if (!resolved.has_value()) {
    if (value_type == v1::VALUE_TYPE_UNSPECIFIED) {
      return Invalid("%s value_type is VALUE_TYPE_UNSPECIFIED", what);
    }
    return Invalid("%s value_type %d is unknown", what,
                   static_cast<int>(value_type));
  }
  *precision = *resolved;
  return absl::OkStatus();
}

absl::Status CheckValuesLength(absl::string_view what, const WireBytes& bytes,
                               uint64_t count, ValuePrecision precision) {
  const uint64_t expected = count * BytesPerValue(precision);
  if (bytes.size() != expected) {
    return Invalid("%s values are %d bytes, expected %d (%d %s values)", what,
                   bytes.size(), expected, count, PrecisionName(precision));
  }
  return absl::OkStatus();
}

namespace {

// The scans in wide vectors where the CPU has them (integer operations
// only: every clone gives the same result).
GRADWIRE_VECTOR_CLONES uint32_t MaxMagnitudeBits16(const uint8_t* src,
                                                   size_t n) {
  return MaxMagnitudeBits<2>(src, n, 0x7fffu);
}

GRADWIRE_VECTOR_CLONES uint32_t MaxMagnitudeBits32(const uint8_t* src,
                                                   size_t n) {
  return MaxMagnitudeBits<4>(src, n, 0x7fffffffu);
}

// The exponent mask of `precision`: a magnitude field at or above it is a
// NaN or an infinity.
uint32_t ExponentMask(ValuePrecision precision) {
  switch (precision) {
    case ValuePrecision::kFp16:
      return 0x7c00u;
    case ValuePrecision::kBf16:
      return 0x7f80u;
    case ValuePrecision::kFp32:
      break;
  }
  return 0x7f800000u;
}

// Copies `n` little-endian fp32 words from `src` to `dst` (a little-endian
// host's floats) and returns their largest magnitude field: a block's check
// and conversion in one loop, where a scan and then a memcpy read it twice.
GRADWIRE_VECTOR_CLONES uint32_t CopyMaxMagnitudeBits32(const uint8_t* src,
                                                       size_t n, float* dst) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, src + 4 * i, sizeof(bits));
    std::memcpy(dst + i, &bits, sizeof(bits));
    largest = std::max(largest, bits & 0x7fffffffu);
  }
  return largest;
}

uint32_t MaxMagnitudeBits(const uint8_t* src, size_t n,
                          ValuePrecision precision) {
  return precision == ValuePrecision::kFp32 ? MaxMagnitudeBits32(src, n)
                                            : MaxMagnitudeBits16(src, n);
}

// Position of the first non-finite value among the `n` at `src`, or -1.
int64_t FirstNonFinite(const uint8_t* src, size_t n, ValuePrecision precision) {
  const uint32_t exponent = ExponentMask(precision);
  const size_t width = BytesPerValue(precision);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits =
        width == 2 ? LoadLE16(src + 2 * i) : LoadLE32(src + 4 * i);
    if ((bits & exponent) == exponent) return static_cast<int64_t>(i);
  }
  return -1;
}

// The value whose magnitude field is `bits`.
float MagnitudeOf(uint32_t bits, ValuePrecision precision) {
  switch (precision) {
    case ValuePrecision::kFp16:
      return HalfBitsToFloat(static_cast<uint16_t>(bits));
    case ValuePrecision::kBf16:
      return Bf16BitsToFloat(static_cast<uint16_t>(bits));
    case ValuePrecision::kFp32:
      break;
  }
  return BitsToFloat(bits);
}

// Converts the `n` values at `src` into `dst`, which under kReject were
// checked finite.
void ReadRun(const uint8_t* src, size_t n, ValuePrecision precision,
             NonFinitePolicy policy, float* dst) {
  switch (precision) {
    case ValuePrecision::kFp16:
      if (policy == NonFinitePolicy::kReject) {
        // Already checked finite: the vector conversion (F16C) applies.
        return compress_kernels::Kernels().half_to_float(src, n, dst);
      }
      return ConvertValues(
          src, n, policy,
          [](const uint8_t* p, size_t i) {
            return HalfBitsToFloat(LoadLE16(p + 2 * i));
          },
          dst);
    case ValuePrecision::kBf16:
      return ConvertValues(
          src, n, policy,
          [](const uint8_t* p, size_t i) {
            return Bf16BitsToFloat(LoadLE16(p + 2 * i));
          },
          dst);
    case ValuePrecision::kFp32:
      break;
  }
  if (kHostIsLittleEndian && policy == NonFinitePolicy::kReject) {
    std::memcpy(dst, src, n * sizeof(float));  // already checked finite
    return;
  }
  ConvertValues(
      src, n, policy,
      [](const uint8_t* p, size_t i) {
        return BitsToFloat(LoadLE32(p + 4 * i));
      },
      dst);
}

}  // namespace

int64_t ReadCheckedValues(const WireBytes& bytes, ValuePrecision precision,
                          NonFinitePolicy policy, float* dst,
                          float* max_magnitude) {
  // Block by block, each checked and then converted while it is in the
  // first-level cache: one pass over the received bytes, however cold.
  constexpr size_t kBlock = 1024;
  const size_t width = BytesPerValue(precision);
  const uint32_t exponent = ExponentMask(precision);
  const bool reject = policy == NonFinitePolicy::kReject;
  uint32_t largest = 0;
  int64_t rejected = -1;
  ForEachValueRun(
      bytes, width, [&](const uint8_t* src, size_t n, size_t first) {
        for (size_t begin = 0; begin < n; begin += kBlock) {
          const size_t count = std::min(kBlock, n - begin);
          const uint8_t* block = src + begin * width;
          float* out = dst + first + begin;
          if (reject) {
            // fp32 on a little-endian host: converting is copying, done in
            // the loop that checks.
            const bool copied =
                precision == ValuePrecision::kFp32 && kHostIsLittleEndian;
            const uint32_t block_largest =
                copied ? CopyMaxMagnitudeBits32(block, count, out)
                       : MaxMagnitudeBits(block, count, precision);
            if (block_largest >= exponent) {
              rejected = static_cast<int64_t>(first + begin) +
                         FirstNonFinite(block, count, precision);
              return false;
            }
            largest = std::max(largest, block_largest);
            if (copied) continue;
          }
          ReadRun(block, count, precision, policy, out);
        }
        return true;
      });
  if (max_magnitude != nullptr) {
    // Under kZero the values were not scanned: no bound is known.
    *max_magnitude = reject ? MagnitudeOf(largest, precision)
                            : std::numeric_limits<float>::infinity();
  }
  return rejected;
}

}  // namespace codec_internal

v1::ValueType ToWire(ValuePrecision precision) {
  switch (precision) {
    case ValuePrecision::kFp16:
      return v1::VALUE_TYPE_FP16;
    case ValuePrecision::kBf16:
      return v1::VALUE_TYPE_BF16;
    case ValuePrecision::kFp32:
      break;
  }
  return v1::VALUE_TYPE_FP32;
}

absl::optional<ValuePrecision> FromWire(v1::ValueType value_type) {
  switch (value_type) {
    case v1::VALUE_TYPE_FP32:
      return ValuePrecision::kFp32;
    case v1::VALUE_TYPE_FP16:
      return ValuePrecision::kFp16;
    case v1::VALUE_TYPE_BF16:
      return ValuePrecision::kBf16;
    default:
      return absl::nullopt;
  }
}

}  // namespace gradwire
