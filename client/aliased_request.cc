#include "client/aliased_request.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/support/slice.h"

namespace gradwire {

// Protobuf's output stream over grpc slices: what protobuf writes goes into
// blocks of our own; what it offers to alias (WriteAliasedRaw: the
// contents of a `bytes` field) becomes a slice that points into the
// message, released through ReleaseSlice.
class AliasedRequest::SliceStream final
    : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  SliceStream(AliasedRequest* owner, size_t total_bytes)
      : owner_(owner), total_bytes_(total_bytes) {}

  bool Next(void** data, int* size) override {
    CloseBlock();
    // A small message fits in one block; a large one's blocks hold only
    // tags, lengths and small fields between aliased ones. Protobuf offers
    // a field for aliasing only when it does not fit in the block's room,
    // so blocks smaller than kMinAliasedBytes make every field of that
    // size or more aliased.
    constexpr size_t kBlockBytes = 1024;
    static_assert(kBlockBytes < kMinAliasedBytes);
    const size_t left = total_bytes_ > written_ ? total_bytes_ - written_ : 0;
    const size_t bytes = std::clamp<size_t>(left, 16, kBlockBytes);
    block_ = grpc::Slice(bytes);
    *data = const_cast<uint8_t*>(block_.begin());
    *size = static_cast<int>(bytes);
    block_used_ = bytes;
    written_ += bytes;
    return true;
  }

  void BackUp(int count) override {
    block_used_ -= count;
    written_ -= count;
  }

  int64_t ByteCount() const override { return static_cast<int64_t>(written_); }

  bool AllowsAliasing() const override { return true; }

  bool WriteAliasedRaw(const void* data, int size) override {
    CloseBlock();
    const size_t bytes = static_cast<size_t>(size);
    if (bytes < kMinAliasedBytes) {
      slices_.emplace_back(data, bytes);  // Copied.
    } else {
      owner_->holders_.fetch_add(1, std::memory_order_relaxed);
      slices_.emplace_back(const_cast<void*>(data), bytes,
                           &AliasedRequest::ReleaseSlice, owner_);
      owner_->aliased_bytes_ += bytes;
    }
    written_ += bytes;
    return true;
  }

  std::vector<grpc::Slice> Finish() {
    CloseBlock();
    return std::move(slices_);
  }

 private:
  // Ends the block being written: its used part becomes the next slice.
  void CloseBlock() {
    if (block_used_ > 0) slices_.push_back(block_.sub(0, block_used_));
    block_ = grpc::Slice();
    block_used_ = 0;
  }

  AliasedRequest* const owner_;
  const size_t total_bytes_;
  size_t written_ = 0;
  grpc::Slice block_;
  size_t block_used_ = 0;
  std::vector<grpc::Slice> slices_;
};

AliasedRequest::AliasedRequest(const google::protobuf::MessageLite& message) {
  const size_t bytes = message.ByteSizeLong();  // Caches the field sizes.
  SliceStream stream(this, bytes);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.EnableAliasing(true);
    message.SerializeWithCachedSizes(&coded);
  }  // The coded stream hands back what it did not use here.
  std::vector<grpc::Slice> slices = stream.Finish();
  buffer_ = grpc::ByteBuffer(slices.data(), slices.size());
}

AliasedRequest::~AliasedRequest() {
  buffer_.Clear();
  if (holders_.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    released_.WaitForNotification();
  }
}

void AliasedRequest::ReleaseSlice(void* self) {
  auto* request = static_cast<AliasedRequest*>(self);
  // The last holder is a slice only once the destructor dropped its own
  // hold and waits: notifying it is then what lets it return.
  if (request->holders_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    request->released_.Notify();
  }
}

AliasedPushStub::AliasedPushStub(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      method_name_(
          absl::StrCat("/", v1::ParameterServer::service_full_name(), "/Push")),
      method_(method_name_.c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
              channel_) {}

grpc::Status AliasedPushStub::Push(grpc::ClientContext* context,
                                   const v1::PushRequest& request,
                                   v1::PushResponse* response) const {
  const AliasedRequest aliased(request);
  return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, v1::PushResponse,
                                           grpc::ByteBuffer,
                                           grpc::protobuf::MessageLite>(
      channel_.get(), method_, context, aliased.buffer(), response);
}

}  // namespace gradwire
