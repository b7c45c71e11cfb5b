// A gradwire.v1.PushRequest read in place from the bytes it arrived in.
//
// Parsing a push into the generated protobuf message copies every `bytes`
// field out of the received buffers (protobuf 3.21 cannot leave a `bytes`
// field where it lies), and the codec then reads the copy: for a dense
// 4 MiB chunk that is a second full pass over the gradient on every push.
// ParsePushRequest reads the same wire format into a PushView whose chunks
// point into the received pieces (chunk_view.h), so the codec reads the
// values from where the transport put them.
//
// It accepts exactly what protobuf's parser accepts and gives the same
// fields: unknown fields (any wire type, groups included) are skipped, a
// known field with another wire type is an unknown field, a singular field
// seen twice keeps its last value, a message field seen twice is merged,
// and setting another member of the `payload` oneof empties the previous
// one (tests/common/codec/push_wire_test.cc checks this against protobuf).
//
// Thread safety: the functions hold no state.
#ifndef GRADWIRE_COMMON_CODEC_PUSH_WIRE_H_
#define GRADWIRE_COMMON_CODEC_PUSH_WIRE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/codec/chunk_view.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

struct ChunkGradientView {
  uint64_t key = 0;
  ChunkDataView gradient;
};

struct PushView {
  uint32_t worker_id = 0;
  uint64_t step = 0;
  std::vector<ChunkGradientView> chunks;
  // The serialized request the view was read from (what a write-ahead log
  // records); empty for a view of a message that was never serialized.
  WireBytes wire;
};

// A view of `request`'s fields, with `serialized` (the request's
// serialization, or empty) as its `wire`; both must outlive the view.
PushView ViewOf(const v1::PushRequest& request,
                absl::string_view serialized = absl::string_view());

// Parses the serialized v1::PushRequest in `bytes` into `*out` (replacing
// what it held; out->wire = bytes), reading no more than `max_chunks`
// entries of `chunks`.
//
// Errors, with `*out` in an unspecified state:
//   INVALID_ARGUMENT     the bytes are not a PushRequest; the message says
//                        what is wrong and at which byte;
//   RESOURCE_EXHAUSTED   more than `max_chunks` chunk entries (counted as
//                        they are met, so a message of millions of empty
//                        entries costs no more than max_chunks of them).
absl::Status ParsePushRequest(const WireBytes& bytes, uint64_t max_chunks,
                              PushView* out);

// Field by field (chunk_view.h's equality for the chunks); `wire` is not
// compared.
bool operator==(const PushView& a, const PushView& b);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_PUSH_WIRE_H_
