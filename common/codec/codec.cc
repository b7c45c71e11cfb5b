#include "common/codec/codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/codec/varint.h"
#include "common/compress/random_index_set.h"

namespace gradwire {
namespace {

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& format,
                     const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

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

// Resizes `*s` to `size` bytes (keeping its capacity) and returns its buffer.
inline uint8_t* ResizeBytes(std::string* s, size_t size) {
  s->resize(size);
  return reinterpret_cast<uint8_t*>(&(*s)[0]);
}
inline const uint8_t* Bytes(absl::string_view s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// ---------------------------------------------------------------------------
// Values in a precision.

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
      for (size_t i = 0; i < n; ++i)
        StoreLE16(dst + 2 * i, FloatToHalfBits(values[i]));
      return;
    case ValuePrecision::kBf16:
      for (size_t i = 0; i < n; ++i)
        StoreLE16(dst + 2 * i, FloatToBf16Bits(values[i]));
      return;
  }
}

inline float LoadValue(const uint8_t* src, size_t i, ValuePrecision precision) {
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

// Position of the first of `n` little-endian words of `Width` bytes at `src`
// whose exponent bits (`exponent_mask`) are all set, i.e. a NaN or infinity;
// -1 when there is none.
template <int Width>
int64_t FirstAllOnesExponent(const uint8_t* src, size_t n,
                             uint32_t exponent_mask) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits =
        Width == 2 ? LoadLE16(src + 2 * i) : LoadLE32(src + 4 * i);
    if ((bits & exponent_mask) == exponent_mask) return static_cast<int64_t>(i);
  }
  return -1;
}

// Resolves the value type of `what` (e.g. "dense").
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

// Checks that `bytes` holds exactly `count` values of `precision`.
absl::Status CheckValuesLength(absl::string_view what, absl::string_view bytes,
                               uint64_t count, ValuePrecision precision) {
  const uint64_t expected = count * BytesPerValue(precision);
  if (bytes.size() != expected) {
    return Invalid("%s values are %d bytes, expected %d (%d %s values)", what,
                   bytes.size(), expected, count, PrecisionName(precision));
  }
  return absl::OkStatus();
}

// Position of the first non-finite value in `bytes`, or -1 when there is
// none or when the policy replaces them anyway.
int64_t FirstRejectedValue(absl::string_view bytes, ValuePrecision precision,
                           NonFinitePolicy policy) {
  if (policy != NonFinitePolicy::kReject) return -1;
  const size_t n = bytes.size() / BytesPerValue(precision);
  switch (precision) {
    case ValuePrecision::kFp16:
      return FirstAllOnesExponent<2>(Bytes(bytes), n, 0x7c00u);
    case ValuePrecision::kBf16:
      return FirstAllOnesExponent<2>(Bytes(bytes), n, 0x7f80u);
    case ValuePrecision::kFp32:
      break;
  }
  return FirstAllOnesExponent<4>(Bytes(bytes), n, 0x7f800000u);
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

// Fills `*out` with the values in `bytes`; non-finite ones become 0 under
// kZero (under kReject the caller has already refused them).
void ReadValues(absl::string_view bytes, ValuePrecision precision,
                NonFinitePolicy policy, std::vector<float>* out) {
  const size_t n = bytes.size() / BytesPerValue(precision);
  out->resize(n);
  if (n == 0) return;
  const uint8_t* src = Bytes(bytes);
  float* dst = out->data();
  switch (precision) {
    case ValuePrecision::kFp16:
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

// ---------------------------------------------------------------------------
// Bit vectors: bit i % 8 of byte i / 8 on the wire; bit i % 64 of word i / 64
// in CompressedChunk.

uint64_t BitBytes(uint64_t bits) { return (bits + 7) / 8; }

void WriteBits(const std::vector<uint64_t>& words, uint64_t numel,
               std::string* out) {
  const size_t n = BitBytes(numel);
  uint8_t* dst = ResizeBytes(out, n);
  for (size_t j = 0; j < n; ++j) {
    dst[j] = static_cast<uint8_t>(words[j >> 3] >> (8 * (j & 7)));
  }
  if (numel & 7) dst[n - 1] &= static_cast<uint8_t>((1u << (numel & 7)) - 1);
}

void ReadBits(absl::string_view bytes, uint64_t numel,
              std::vector<uint64_t>* words) {
  words->assign(BitWords(numel), 0);
  const uint8_t* src = Bytes(bytes);
  for (size_t j = 0; j < bytes.size(); ++j) {
    (*words)[j >> 3] |= static_cast<uint64_t>(src[j]) << (8 * (j & 7));
  }
}

// Checks that `bytes` holds exactly `bits` bits followed by zero padding.
absl::Status CheckBitLength(absl::string_view what, absl::string_view bytes,
                            uint64_t bits) {
  if (bytes.size() != BitBytes(bits)) {
    return Invalid("%s are %d bytes, expected %d for %d bits", what,
                   bytes.size(), BitBytes(bits), bits);
  }
  if ((bits & 7) != 0 && (Bytes(bytes)[bytes.size() - 1] >> (bits & 7)) != 0) {
    return Invalid("%s have nonzero padding bits after bit %d", what, bits);
  }
  return absl::OkStatus();
}

// Fixed-width codes packed least-significant bit first.
class BitPacker {
 public:
  explicit BitPacker(uint8_t* dst) : dst_(dst) {}
  void Put(uint32_t code, int width) {
    pending_ |= static_cast<uint64_t>(code) << count_;
    count_ += width;
    while (count_ >= 8) {
      *dst_++ = static_cast<uint8_t>(pending_);
      pending_ >>= 8;
      count_ -= 8;
    }
  }
  void Flush() {
    if (count_ > 0) *dst_++ = static_cast<uint8_t>(pending_);
  }

 private:
  uint8_t* dst_;
  uint64_t pending_ = 0;
  int count_ = 0;
};

// Reads what BitPacker wrote. The caller guarantees that the input holds
// enough bytes for every Get.
class BitUnpacker {
 public:
  explicit BitUnpacker(const uint8_t* src) : src_(src) {}
  uint32_t Get(int width) {
    while (count_ < width) {
      pending_ |= static_cast<uint64_t>(*src_++) << count_;
      count_ += 8;
    }
    const uint32_t code =
        static_cast<uint32_t>(pending_ & ((uint64_t{1} << width) - 1));
    pending_ >>= width;
    count_ -= width;
    return code;
  }

 private:
  const uint8_t* src_;
  uint64_t pending_ = 0;
  int count_ = 0;
};

// ---------------------------------------------------------------------------
// Encoding, one function per payload.

void EncodeSparseIndices(const std::vector<uint32_t>& indices,
                         std::string* out) {
  size_t size = 0;
  uint64_t next = 0;  // smallest index the next entry may have
  for (uint32_t index : indices) {
    size += VarintLength(index - next);
    next = uint64_t{index} + 1;
  }
  char* dst = reinterpret_cast<char*>(ResizeBytes(out, size));
  next = 0;
  for (uint32_t index : indices) {
    dst = EncodeVarint64(dst, index - next);
    next = uint64_t{index} + 1;
  }
}

void EncodeQsgd(const CompressedChunk& chunk, v1::QsgdValues* out) {
  out->set_norm(chunk.norm);
  out->set_levels(chunk.num_levels);
  WriteBits(chunk.negative_bits, chunk.numel, out->mutable_signs());
  const int width = QsgdBitsPerLevel(chunk.num_levels);
  BitPacker packer(
      ResizeBytes(out->mutable_level_codes(), BitBytes(chunk.numel * width)));
  for (uint16_t level : chunk.levels) packer.Put(level, width);
  packer.Flush();
}

// Wire limits that CheckWellFormed does not cover.
absl::Status CheckEncodable(const CompressedChunk& chunk) {
  if (chunk.numel >= (uint64_t{1} << 32)) {
    return Invalid("numel %d does not fit the wire's 32-bit indices",
                   chunk.numel);
  }
  if (chunk.encoding == Encoding::kQsgd) {
    if (chunk.num_levels > 65535) {
      return Invalid("qsgd levels %d exceed 65535", chunk.num_levels);
    }
    if (chunk.norm < 0) return Invalid("qsgd norm %g is negative", chunk.norm);
  }
  if (chunk.encoding == Encoding::kSign && chunk.scale < 0) {
    return Invalid("sign scale %g is negative", chunk.scale);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Decoding, one function per payload: validate everything, then write.

absl::Status DecodeDense(const v1::DenseValues& in, uint64_t numel,
                         const DecodeOptions& options, CompressedChunk* out) {
  ValuePrecision precision;
  absl::Status status = CheckValueType("dense", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("dense", in.values(), numel, precision);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("dense value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kDense;
  out->numel = numel;
  out->precision = precision;
  ReadValues(in.values(), precision, options.non_finite, &out->values);
  return absl::OkStatus();
}

// Checks that `bytes` is exactly `nnz` gap varints of strictly increasing
// indices below `numel`.
absl::Status CheckSparseIndices(absl::string_view bytes, uint64_t nnz,
                                uint64_t numel) {
  const char* cursor = bytes.data();
  const char* const limit = cursor + bytes.size();
  uint64_t next = 0;  // smallest index the next entry may have
  for (uint64_t j = 0; j < nnz; ++j) {
    if (cursor == limit) {
      return Invalid("sparse indices end after %d of %d varints", j, nnz);
    }
    uint64_t gap;
    switch (ParseVarint64(&cursor, limit, &gap)) {
      case VarintParse::kOk:
        break;
      case VarintParse::kTruncated:
        return Invalid("sparse indices are truncated inside varint %d", j);
      case VarintParse::kOverflow:
        return Invalid("sparse index varint %d overflows 64 bits", j);
    }
    if (gap > std::numeric_limits<uint64_t>::max() - next) {
      return Invalid(
          "sparse index at position %d does not increase: gap %d after index "
          "%d wraps around",
          j, gap, next - 1);
    }
    const uint64_t index = next + gap;
    if (index >= numel) {
      return Invalid(
          "sparse index %d at position %d is out of range for numel %d", index,
          j, numel);
    }
    next = index + 1;
  }
  if (cursor != limit) {
    return Invalid("sparse indices have %d trailing bytes after %d varints",
                   limit - cursor, nnz);
  }
  return absl::OkStatus();
}

// Fills `*out` from gap varints that CheckSparseIndices accepted.
void ReadSparseIndices(absl::string_view bytes, uint64_t nnz,
                       std::vector<uint32_t>* out) {
  out->resize(nnz);
  const char* cursor = bytes.data();
  uint64_t next = 0;
  for (uint64_t j = 0; j < nnz; ++j) {
    uint64_t gap;
    cursor = ParseValidVarint64(cursor, &gap);
    (*out)[j] = static_cast<uint32_t>(next + gap);
    next += gap + 1;
  }
}

absl::Status DecodeSparse(const v1::SparseValues& in, uint64_t numel,
                          const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t nnz = in.nnz();
  if (nnz > numel) return Invalid("sparse nnz %d exceeds numel %d", nnz, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("sparse", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("sparse", in.values(), nnz, precision);
  if (!status.ok()) return status;
  status = CheckSparseIndices(in.indices(), nnz, numel);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("sparse value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kSparse;
  out->numel = numel;
  out->precision = precision;
  ReadSparseIndices(in.indices(), nnz, &out->indices);
  ReadValues(in.values(), precision, options.non_finite, &out->values);
  return absl::OkStatus();
}

absl::Status DecodeRandomK(const v1::RandomKValues& in, uint64_t numel,
                           const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t k = in.k();
  if (k > numel) return Invalid("random-k k %d exceeds numel %d", k, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("random-k", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("random-k", in.values(), k, precision);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("random-k value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kRandomK;
  out->numel = numel;
  out->precision = precision;
  out->seed = in.seed();
  out->indices = RandomIndexSet(in.seed(), numel, k);
  ReadValues(in.values(), precision, options.non_finite, &out->values);
  return absl::OkStatus();
}

// Checks a float that scales every element (QSGD norm, sign scale) and
// returns in `*value` what to use: 0 for a non-finite one under kZero.
absl::Status CheckScale(absl::string_view what, float scale,
                        NonFinitePolicy policy, float* value) {
  if (!std::isfinite(scale)) {
    if (policy == NonFinitePolicy::kReject) {
      return Invalid("%s %g is not finite", what, scale);
    }
    scale = 0.0f;
  }
  if (scale < 0) return Invalid("%s %g is negative", what, scale);
  *value = scale;
  return absl::OkStatus();
}

// Checks the packed level codes of a QSGD payload: exact length, every code
// <= levels, zero padding.
absl::Status CheckLevelCodes(absl::string_view bytes, uint64_t numel,
                             uint32_t levels) {
  const int width = QsgdBitsPerLevel(levels);
  absl::Status status =
      CheckBitLength("qsgd level_codes", bytes, numel * width);
  if (!status.ok()) return status;
  BitUnpacker unpacker(Bytes(bytes));
  for (uint64_t i = 0; i < numel; ++i) {
    const uint32_t code = unpacker.Get(width);
    if (code > levels) {
      return Invalid("qsgd level code %d at position %d exceeds levels %d",
                     code, i, levels);
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeQsgd(const v1::QsgdValues& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  const uint32_t levels = in.levels();
  if (levels < 1 || levels > 65535) {
    return Invalid("qsgd levels %d are outside [1, 65535]", levels);
  }
  float norm = 0.0f;
  absl::Status status =
      CheckScale("qsgd norm", in.norm(), options.non_finite, &norm);
  if (!status.ok()) return status;
  status = CheckBitLength("qsgd signs", in.signs(), numel);
  if (!status.ok()) return status;
  status = CheckLevelCodes(in.level_codes(), numel, levels);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kQsgd;
  out->numel = numel;
  out->norm = norm;
  out->num_levels = levels;
  ReadBits(in.signs(), numel, &out->negative_bits);
  out->levels.resize(numel);
  const int width = QsgdBitsPerLevel(levels);
  BitUnpacker unpacker(Bytes(in.level_codes()));
  for (uint64_t i = 0; i < numel; ++i) {
    out->levels[i] = static_cast<uint16_t>(unpacker.Get(width));
  }
  return absl::OkStatus();
}

absl::Status DecodeSign(const v1::SignValues& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  float scale = 0.0f;
  absl::Status status =
      CheckScale("sign scale", in.scale(), options.non_finite, &scale);
  if (!status.ok()) return status;
  status = CheckBitLength("sign bits", in.bits(), numel);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kSign;
  out->numel = numel;
  out->scale = scale;
  ReadBits(in.bits(), numel, &out->positive_bits);
  return absl::OkStatus();
}

absl::Status CheckNumel(uint64_t numel, const DecodeOptions& options) {
  if (numel != options.expected_numel) {
    return Invalid("chunk numel %d does not match the expected numel %d", numel,
                   options.expected_numel);
  }
  if (numel > options.max_numel) {
    return Invalid("chunk numel %d exceeds the maximum %d", numel,
                   options.max_numel);
  }
  if (numel >= (uint64_t{1} << 32)) {
    return Invalid("chunk numel %d does not fit 32-bit indices", numel);
  }
  return absl::OkStatus();
}

}  // namespace

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

int QsgdBitsPerLevel(uint32_t levels) { return 32 - __builtin_clz(levels | 1); }

absl::Status EncodeChunk(const CompressedChunk& chunk, v1::ChunkData* out) {
  absl::Status status = CheckWellFormed(chunk);
  if (!status.ok()) return status;
  status = CheckEncodable(chunk);
  if (!status.ok()) return status;
  out->set_numel(chunk.numel);
  const v1::ValueType value_type = ToWire(chunk.precision);
  switch (chunk.encoding) {
    case Encoding::kDense: {
      v1::DenseValues* dense = out->mutable_dense();
      dense->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, dense->mutable_values());
      break;
    }
    case Encoding::kSparse: {
      v1::SparseValues* sparse = out->mutable_sparse();
      sparse->set_nnz(chunk.indices.size());
      EncodeSparseIndices(chunk.indices, sparse->mutable_indices());
      sparse->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, sparse->mutable_values());
      break;
    }
    case Encoding::kRandomK: {
      v1::RandomKValues* random_k = out->mutable_random_k();
      random_k->set_seed(chunk.seed);
      random_k->set_k(chunk.values.size());
      random_k->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, random_k->mutable_values());
      break;
    }
    case Encoding::kQsgd:
      EncodeQsgd(chunk, out->mutable_qsgd());
      break;
    case Encoding::kSign: {
      v1::SignValues* sign = out->mutable_sign();
      sign->set_scale(chunk.scale);
      WriteBits(chunk.positive_bits, chunk.numel, sign->mutable_bits());
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeChunk(const v1::ChunkData& in, const DecodeOptions& options,
                         CompressedChunk* out) {
  const uint64_t numel = in.numel();
  absl::Status status = CheckNumel(numel, options);
  if (!status.ok()) return status;
  switch (in.payload_case()) {
    case v1::ChunkData::kDense:
      return DecodeDense(in.dense(), numel, options, out);
    case v1::ChunkData::kSparse:
      return DecodeSparse(in.sparse(), numel, options, out);
    case v1::ChunkData::kRandomK:
      return DecodeRandomK(in.random_k(), numel, options, out);
    case v1::ChunkData::kQsgd:
      return DecodeQsgd(in.qsgd(), numel, options, out);
    case v1::ChunkData::kSign:
      return DecodeSign(in.sign(), numel, options, out);
    case v1::ChunkData::PAYLOAD_NOT_SET:
      break;
  }
  return Invalid("chunk has no payload");
}

}  // namespace gradwire
