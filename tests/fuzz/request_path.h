// What the GetInfo and Pull fuzz targets (getinfo_fuzz.cc, pull_fuzz.cc)
// share: a request's bytes taken the way ParameterServerService takes them
// before the shard sees them. Its fields are counted on the received
// slices (CountRequestFields with the request's descriptor and the
// service's limits), a request over a limit or not a message is refused
// unparsed, and only then is it parsed as gRPC parses it.
//
// Thread safety: none; the functions hold no state.
#ifndef GRADWIRE_TESTS_FUZZ_REQUEST_PATH_H_
#define GRADWIRE_TESTS_FUZZ_REQUEST_PATH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/process/request_fields.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {

// `bytes` as a received buffer of slices of `slice_size` bytes (0: one
// slice), so that field boundaries fall across slices as they do on the
// wire.
inline grpc::ByteBuffer ReceivedBuffer(absl::string_view bytes,
                                       size_t slice_size) {
  if (slice_size == 0) slice_size = std::max<size_t>(bytes.size(), 1);
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice_size) {
    const absl::string_view piece = bytes.substr(at, slice_size);
    slices.emplace_back(piece.data(), piece.size());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// How the service took a request.
enum class Taken { kOverLimit, kMalformed, kNotParsed, kParsed };

// Counts `buffer`'s fields as the service does for a `Request` (GetInfo:
// unknown fields only; otherwise also the entries of `chunks`, at most
// `max_chunk_entries`), then parses it into `request` when the count lets
// it through. Checks what the count promises: each count at most its limit
// + 1, and a message the count found well formed parses.
template <typename Request>
Taken TakeRequest(const grpc::ByteBuffer& buffer, uint64_t max_chunk_entries,
                  Request* request) {
  RequestFieldLimits limits;
  if constexpr (!std::is_same_v<Request, v1::GetInfoRequest>) {
    limits.entries_field = Request::kChunksFieldNumber;
    limits.max_entries = max_chunk_entries;
  }
  const RequestFieldCount count =
      CountRequestFields(buffer, *Request::descriptor(), limits);
  Check(count.entries <= limits.max_entries + 1);
  Check(count.unknown_fields <= limits.max_unknown_fields + 1);
  Check((count.unknown_fields == 0) == (count.first_unknown_in == nullptr));
  if (count.entries > limits.max_entries ||
      count.unknown_fields > limits.max_unknown_fields) {
    return Taken::kOverLimit;
  }
  // Every unknown field within the limit was counted, so a well-formed
  // message holds at most that many.
  if (!count.well_formed) return Taken::kMalformed;
  grpc::ByteBuffer copy(buffer);
  const bool parsed =
      grpc::SerializationTraits<Request>::Deserialize(&copy, request).ok();
  Check(parsed);
  return Taken::kParsed;
}

}  // namespace gradwire::fuzz

#endif  // GRADWIRE_TESTS_FUZZ_REQUEST_PATH_H_
