#include "server/process/request_parsing.h"

#include <type_traits>

#include "absl/strings/str_format.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "server/process/request_fields.h"

namespace gradwire {
namespace {

// Refuses, unparsed, a request that would cost more to parse than its
// bytes (request_fields.h): more chunk entries than `max_chunk_entries`
// (RESOURCE_EXHAUSTED for Init, INVALID_ARGUMENT for Push and Pull, as the
// shard would answer), or more unknown fields than kMaxUnknownRequestFields
// (INVALID_ARGUMENT). Bytes that are not a message set *malformed: what
// follows the bad byte was not counted, so they must not reach a parser
// that keeps unknown fields.
template <typename Request>
grpc::Status CheckRequestFields(const grpc::ByteBuffer& bytes,
                                uint64_t max_chunk_entries, bool* malformed) {
  const google::protobuf::Descriptor& type = *Request::descriptor();
  RequestFieldLimits limits;
  if constexpr (!std::is_same_v<Request, v1::GetInfoRequest>) {
    limits.entries_field = Request::kChunksFieldNumber;
    limits.max_entries = max_chunk_entries;
  }
  const RequestFieldCount count = CountRequestFields(bytes, type, limits);
  *malformed = !count.well_formed;
  if (count.entries > limits.max_entries) {
    return grpc::Status(std::is_same_v<Request, v1::InitRequest>
                            ? grpc::StatusCode::RESOURCE_EXHAUSTED
                            : grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrFormat("%s names more than %d chunks, the "
                                        "most this shard accepts "
                                        "(--max-chunks)",
                                        type.name(), limits.max_entries));
  }
  if (count.unknown_fields > limits.max_unknown_fields) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrFormat(
            "%s carries more than %d fields that its schema does not define "
            "(the first: field %d of %s), the most this shard accepts; is "
            "the client built from another gradwire.v1 schema?",
            type.name(), limits.max_unknown_fields, count.first_unknown_number,
            count.first_unknown_in->full_name()));
  }
  return grpc::Status::OK;
}

// INVALID_ARGUMENT: the `size` bytes sent to `method` are not a `type`.
grpc::Status NotAMessage(const char* method, size_t size,
                         const google::protobuf::Descriptor& type) {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrFormat("%s: the %d request bytes are not a valid %s", method,
                      size, type.full_name()));
}

// Parses `bytes` as a `Request`; INVALID_ARGUMENT naming `method` when they
// are not one.
template <typename Request>
grpc::Status ParseRequest(const grpc::ByteBuffer& bytes, const char* method,
                          Request* request) {
  // A copy shares the received slices; parsing consumes it.
  grpc::ByteBuffer copy(bytes);
  const size_t size = copy.Length();
  if (grpc::SerializationTraits<Request>::Deserialize(&copy, request).ok()) {
    return grpc::Status::OK;
  }
  return NotAMessage(method, size, *Request::descriptor());
}

}  // namespace

template <typename Request>
grpc::Status Parse(const grpc::ByteBuffer& bytes, const char* method,
                   uint64_t max_chunk_entries, Request* request) {
  bool malformed = false;
  grpc::Status status =
      CheckRequestFields<Request>(bytes, max_chunk_entries, &malformed);
  if (status.ok() && malformed) {
    return NotAMessage(method, bytes.Length(), *Request::descriptor());
  }
  if (status.ok()) status = ParseRequest(bytes, method, request);
  return status;
}

template grpc::Status Parse(const grpc::ByteBuffer&, const char*, uint64_t,
                            v1::InitRequest*);
template grpc::Status Parse(const grpc::ByteBuffer&, const char*, uint64_t,
                            v1::PullRequest*);
template grpc::Status Parse(const grpc::ByteBuffer&, const char*, uint64_t,
                            v1::GetInfoRequest*);

// Its reader keeps no unknown field, but a request with many is refused all
// the same, like the other methods; malformed bytes are left to the reader,
// which says at which byte they go wrong.
grpc::Status Parse(const grpc::ByteBuffer& bytes, const char* method,
                   uint64_t max_chunk_entries, ReceivedPush* push) {
  bool malformed = false;
  const grpc::Status fields =
      CheckRequestFields<v1::PushRequest>(bytes, max_chunk_entries, &malformed);
  if (!fields.ok()) return fields;
  // Dump takes a reference to each slice; it copies no bytes.
  if (!bytes.Dump(&push->slices).ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the request's slices could not be read");
  }
  WireBytes wire;
  for (const grpc::Slice& slice : push->slices) {
    wire.Append(absl::string_view(reinterpret_cast<const char*>(slice.begin()),
                                  slice.size()));
  }
  const absl::Status status =
      ParsePushRequest(wire, max_chunk_entries, &push->view);
  if (absl::IsResourceExhausted(status)) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrFormat("PushRequest names more than %d chunks, the most this "
                        "shard accepts (--max-chunks)",
                        max_chunk_entries));
  }
  if (!status.ok()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrFormat("%s: the %d request bytes are not a valid %s (%s)",
                        method, wire.size(), push->descriptor()->full_name(),
                        status.message()));
  }
  return grpc::Status::OK;
}

}  // namespace gradwire
