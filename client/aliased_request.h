// A protobuf request as a grpc::ByteBuffer without copying its bulk
// fields: the buffer's slices point into the message's own `bytes` fields
// (protobuf's aliasing serialization), and only the tags, lengths and small
// fields are written into slices of their own. A dense push of a 4 MiB
// chunk is then sent from the worker's encoded values as they are, where
// the generated stub would copy them into a fresh buffer first.
//
// Lifetime: the message must stay alive and unchanged while the object
// lives. gRPC may keep references to the slices after the call that sent
// them returns (until its transport has written them), so the destructor
// waits until gRPC has released every slice that points into the message.
//
// Thread safety: one object per call; the destructor may run on any thread
// while gRPC's threads release slices.
#ifndef GRADWIRE_CLIENT_ALIASED_REQUEST_H_
#define GRADWIRE_CLIENT_ALIASED_REQUEST_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "google/protobuf/message_lite.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace gradwire {

class AliasedRequest {
 public:
  // Fields shorter than this are copied: a slice of their own would cost
  // more than the copy.
  static constexpr size_t kMinAliasedBytes = 4096;

  explicit AliasedRequest(const google::protobuf::MessageLite& message);
  ~AliasedRequest();
  AliasedRequest(const AliasedRequest&) = delete;
  AliasedRequest& operator=(const AliasedRequest&) = delete;

  // The serialized message: exactly message.SerializeAsString()'s bytes.
  const grpc::ByteBuffer& buffer() const { return buffer_; }
  // How many of its bytes point into the message rather than being copied.
  size_t aliased_bytes() const { return aliased_bytes_; }

 private:
  class SliceStream;
  // Called by gRPC when the last reference to an aliasing slice goes.
  static void ReleaseSlice(void* self);

  grpc::ByteBuffer buffer_;
  size_t aliased_bytes_ = 0;
  // The aliasing slices gRPC has not released, plus one that the
  // destructor drops; the slice released last notifies the destructor.
  std::atomic<int> holders_{1};
  absl::Notification released_;
};

// ParameterServer.Push as the generated stub calls it (a blocking unary
// call, the same method name and the same bytes on the wire), with the
// request sent through AliasedRequest.
class AliasedPushStub {
 public:
  explicit AliasedPushStub(std::shared_ptr<grpc::Channel> channel);

  // Returns once gRPC has released the request (AliasedRequest).
  grpc::Status Push(grpc::ClientContext* context,
                    const v1::PushRequest& request,
                    v1::PushResponse* response) const;

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  const std::string method_name_;
  const grpc::internal::RpcMethod method_;
};

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_ALIASED_REQUEST_H_
