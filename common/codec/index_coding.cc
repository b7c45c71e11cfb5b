// The indices of sparse payloads: strictly increasing, each written as the
// varint of its gap to the previous index + 1.
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

}  // namespace codec_internal
}  // namespace gradwire
