// Bit vectors on the wire (sign bits, QSGD signs) and the width of QSGD
// level codes.
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/codec/codec.h"
#include "common/codec/codec_internal.h"

namespace gradwire {
namespace codec_internal {

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

}  // namespace codec_internal

int QsgdBitsPerLevel(uint32_t levels) { return 32 - __builtin_clz(levels | 1); }

}  // namespace gradwire
