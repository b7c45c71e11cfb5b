// The indices of sparse payloads: strictly increasing, each written as the
// varint of its gap to the previous index + 1.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/codec/codec_internal.h"
#include "common/codec/varint.h"

namespace gradwire {
namespace codec_internal {

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

namespace {

// The error of a varint that did not parse at position `j`.
absl::Status BadVarint(VarintParse parse, uint64_t j) {
  if (parse == VarintParse::kTruncated) {
    return Invalid("sparse indices are truncated inside varint %d", j);
  }
  return Invalid("sparse index varint %d overflows 64 bits", j);
}

}  // namespace

absl::Status DecodeSparseIndices(absl::string_view bytes, uint64_t nnz,
                                 uint64_t numel, std::vector<uint32_t>* out) {
  // Every varint takes a byte at least: with fewer bytes than nnz the loop
  // stops at the end of the bytes, before position bytes.size(), so the
  // buffer never needs more (and a short payload allocates little).
  out->resize(std::min<uint64_t>(nnz, bytes.size()));
  uint32_t* dst = out->data();
  const char* cursor = bytes.data();
  const char* const limit = cursor + bytes.size();
  uint64_t next = 0;  // smallest index the next entry may have
  for (uint64_t j = 0; j < nnz; ++j) {
    if (cursor == limit) {
      return Invalid("sparse indices end after %d of %d varints", j, nnz);
    }
    // One- and two-byte gaps (below 2^14) inline: next + gap cannot wrap,
    // next <= numel < 2^32.
    uint64_t gap = static_cast<uint8_t>(*cursor);
    if (gap < 0x80) {
      ++cursor;
    } else if (limit - cursor >= 2 && static_cast<uint8_t>(cursor[1]) < 0x80) {
      gap = (gap & 0x7f) | uint64_t{static_cast<uint8_t>(cursor[1])} << 7;
      cursor += 2;
    } else {
      const VarintParse parse = ParseVarint64(&cursor, limit, &gap);
      if (parse != VarintParse::kOk) return BadVarint(parse, j);
      if (gap > std::numeric_limits<uint64_t>::max() - next) {
        return Invalid(
            "sparse index at position %d does not increase: gap %d after "
            "index %d wraps around",
            j, gap, next - 1);
      }
    }
    const uint64_t index = next + gap;
    if (index >= numel) {
      return Invalid(
          "sparse index %d at position %d is out of range for numel %d", index,
          j, numel);
    }
    dst[j] = static_cast<uint32_t>(index);
    next = index + 1;
  }
  if (cursor != limit) {
    return Invalid("sparse indices have %d trailing bytes after %d varints",
                   limit - cursor, nnz);
  }
  return absl::OkStatus();
}

}  // namespace codec_internal
}  // namespace gradwire
