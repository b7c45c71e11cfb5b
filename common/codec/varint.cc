#include "common/codec/varint.h"

namespace gradwire {

void AppendVarint64(std::string* out, uint64_t value) {
  char buffer[kMaxVarint64Bytes];
  const char* end = EncodeVarint64(buffer, value);
  out->append(buffer, static_cast<size_t>(end - buffer));
}

VarintParse ParseVarint64(const char** cursor, const char* limit,
                          uint64_t* value) {
  const char* p = *cursor;
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarint64Bytes; ++i) {
    if (p == limit) return VarintParse::kTruncated;
    const uint8_t byte = static_cast<uint8_t>(*p++);
    // The 10th byte holds bit 63 only; anything above it overflows.
    if (i == kMaxVarint64Bytes - 1 && byte > 1) return VarintParse::kOverflow;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *value = result;
      *cursor = p;
      return VarintParse::kOk;
    }
  }
  return VarintParse::kOverflow;  // unreachable: the 10th byte returns above
}

}  // namespace gradwire
