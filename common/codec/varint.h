// Unsigned LEB128 varints, as used for the gap-encoded indices of
// SparseValues (proto/gradwire/v1/chunk.proto).
//
// A varint stores 7 bits per byte, least-significant group first; the high
// bit of each byte is set when another byte follows. A uint64 needs at most
// kMaxVarint64Bytes bytes.
//
// All functions are pure and thread-safe.
#ifndef GRADWIRE_COMMON_CODEC_VARINT_H_
#define GRADWIRE_COMMON_CODEC_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace gradwire {

inline constexpr size_t kMaxVarint64Bytes = 10;

// Number of bytes EncodeVarint64 writes for `value` (1 to 10).
inline size_t VarintLength(uint64_t value) {
  // 7 payload bits per byte; zero still takes one byte.
  const int bits = 64 - __builtin_clzll(value | 1);
  return static_cast<size_t>((bits + 6) / 7);
}

// Writes `value` at `dst`, which must have room for VarintLength(value)
// bytes, and returns the position just past the last byte written.
inline char* EncodeVarint64(char* dst, uint64_t value) {
  while (value >= 0x80) {
    *dst++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *dst++ = static_cast<char>(value);
  return dst;
}

// Appends `value` to `*out`.
void AppendVarint64(std::string* out, uint64_t value);

enum class VarintParse {
  kOk,
  // The input ended while a continuation bit was set (or was empty).
  kTruncated,
  // The varint does not fit in 64 bits: more than 10 bytes, or a 10th byte
  // carrying more than the top bit.
  kOverflow,
};

// Parses one varint from [*cursor, limit). On kOk stores it in `*value` and
// advances `*cursor` past it. On failure leaves `*cursor` and `*value`
// unchanged. Never reads at or past `limit`. Overlong but in-range encodings
// (e.g. 0x80 0x00 for 0) are accepted, as protobuf accepts them.
VarintParse ParseVarint64(const char** cursor, const char* limit,
                          uint64_t* value);

// ParseVarint64 for input already known to be valid (as checked by a
// previous ParseVarint64 over the same bytes): no bounds checks.
inline const char* ParseValidVarint64(const char* p, uint64_t* value) {
  uint64_t result = 0;
  int shift = 0;
  uint8_t byte;
  do {
    byte = static_cast<uint8_t>(*p++);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  *value = result;
  return p;
}

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_VARINT_H_
