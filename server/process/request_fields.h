// What a received request costs to parse, counted on its bytes before it is
// parsed.
//
// Parsing allocates per field, not per byte: a repeated message entry is an
// object of its own, and protobuf 3.21 keeps every field its schema does
// not know as an object of its own too (UnknownFieldSet: about 50 to 100
// bytes for a 2-byte field, beyond gRPC's memory quota). A 60 MB GetInfo of
// empty unknown fields once took a shard 1.8 GB. CountRequestFields walks
// the serialized message as its descriptor describes it, into every known
// message field and every unknown group, and counts the two things that
// cost more than their bytes: the entries of one repeated top-level field
// (the request's `chunks`) and the unknown fields at any depth. The service
// refuses a request over either limit unparsed, so what a request costs is
// bounded by its bytes plus those limits.
//
// A field is unknown, as protobuf's parser sees it, when its number is not
// in its message's descriptor or it arrives with another wire type than
// its declaration (a repeated scalar may come packed or not).
//
// Thread safety: the function holds no state.
#ifndef GRADWIRE_SERVER_PROCESS_REQUEST_FIELDS_H_
#define GRADWIRE_SERVER_PROCESS_REQUEST_FIELDS_H_

#include <cstdint>

#include "google/protobuf/descriptor.h"
#include "grpcpp/support/byte_buffer.h"

namespace gradwire {

// The unknown fields a request may carry: a few fields of a newer schema
// are read past, as protobuf would; more cost the shard at most about
// 100 KB.
inline constexpr uint64_t kMaxUnknownRequestFields = 1024;

struct RequestFieldLimits {
  // The top-level repeated field whose entries are counted (0: none), and
  // the most entries it may have.
  int entries_field = 0;
  uint64_t max_entries = 0;
  uint64_t max_unknown_fields = kMaxUnknownRequestFields;
};

struct RequestFieldCount {
  // False when the bytes are not a message of the type (a cut-short field, a
  // bad wire type or tag, nesting deeper than protobuf's limit of 100). The
  // counts are then what was met before the bad byte.
  bool well_formed = true;
  // Counting stops at the first field past a limit, so each count is at
  // most its limit + 1.
  uint64_t entries = 0;
  uint64_t unknown_fields = 0;
  // The first unknown field met: its number and the message it was in
  // (nullptr while there is none; inside an unknown group, the message
  // that holds the group).
  int first_unknown_number = 0;
  const google::protobuf::Descriptor* first_unknown_in = nullptr;
};

// Counts, in one pass over `bytes` (a serialized message of type `type`;
// the buffer's slices are shared, not copied), the entries of
// `limits.entries_field` and the unknown fields, stopping once either is
// over its limit or at the first malformed byte.
RequestFieldCount CountRequestFields(const grpc::ByteBuffer& bytes,
                                     const google::protobuf::Descriptor& type,
                                     const RequestFieldLimits& limits);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_REQUEST_FIELDS_H_
