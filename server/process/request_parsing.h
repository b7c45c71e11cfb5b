// Step 3 of a call (parameter_server_service.h): a received request's
// fields counted on its bytes (request_fields.h), then the request parsed,
// so that a request that would cost more to parse than its bytes is refused
// unparsed.
//
// Errors are the grpc::Status the call answers with: INVALID_ARGUMENT
// naming the method when the bytes are not a message of the request's type
// or carry more unknown fields than kMaxUnknownRequestFields; for more
// chunk entries than the shard accepts, RESOURCE_EXHAUSTED for Init and
// INVALID_ARGUMENT for Push and Pull, as the shard itself would answer.
//
// Thread safety: the functions hold no state.
#ifndef GRADWIRE_SERVER_PROCESS_REQUEST_PARSING_H_
#define GRADWIRE_SERVER_PROCESS_REQUEST_PARSING_H_

#include <cstdint>
#include <vector>

#include "common/codec/push_wire.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"

namespace gradwire {

// A Push as the shard reads it: the received slices, and the request read in
// place from them (common/codec/push_wire.h), so that no gradient byte is
// copied before the codec decodes it.
struct ReceivedPush {
  std::vector<grpc::Slice> slices;
  PushView view;
  uint32_t worker_id() const { return view.worker_id; }
  // The message it stands for, for the messages that name it.
  static const google::protobuf::Descriptor* descriptor() {
    return v1::PushRequest::descriptor();
  }
};

// Parses `bytes`, sent to `method`, into *request once its fields are
// counted, with at most `max_chunk_entries` chunk entries. Defined for
// v1::InitRequest, v1::PullRequest and v1::GetInfoRequest.
template <typename Request>
grpc::Status Parse(const grpc::ByteBuffer& bytes, const char* method,
                   uint64_t max_chunk_entries, Request* request);

// The same for a Push, read in place from the received slices (which
// *push keeps). Malformed bytes are refused with the byte at which they go
// wrong.
grpc::Status Parse(const grpc::ByteBuffer& bytes, const char* method,
                   uint64_t max_chunk_entries, ReceivedPush* push);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_REQUEST_PARSING_H_
