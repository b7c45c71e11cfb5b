#include "client/health_client.h"

#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/shard_channel.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace gradwire {
namespace {

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum ServingStatus : uint64_t {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// The installed gRPC ships no generated health stubs, and the two messages
// are one field each, so they are coded here with protobuf's wire-level
// API: HealthCheckRequest{string service = 1}.
grpc::ByteBuffer EncodeCheckRequest(absl::string_view service) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag(/*field 1, length-delimited*/ (1 << 3) | 2);
    out.WriteVarint32(static_cast<uint32_t>(service.size()));
    out.WriteRaw(service.data(), static_cast<int>(service.size()));
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// HealthCheckResponse{ServingStatus status = 1}; an absent field is
// UNKNOWN (proto3 default).
absl::StatusOr<uint64_t> DecodeServingStatus(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InternalError("unreadable health response");
  }
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) {
    return absl::InternalError("malformed health response");
  }
  uint64_t status = kUnknown;
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& field = fields.field(i);
    if (field.number() == 1 &&
        field.type() == google::protobuf::UnknownField::TYPE_VARINT) {
      status = field.varint();
    }
  }
  return status;
}

absl::Status ToStatus(uint64_t serving_status) {
  switch (serving_status) {
    case kServing:
      return absl::OkStatus();
    case kNotServing:
      return absl::UnavailableError("NOT_SERVING (the shard is shutting down)");
    case kServiceUnknown:
      return absl::NotFoundError("SERVICE_UNKNOWN");
    default:
      return absl::UnavailableError(
          absl::StrCat("serving status ", serving_status, " (UNKNOWN)"));
  }
}

// One Check call; the ServingStatus or the call's error.
absl::StatusOr<uint64_t> Check(const std::string& address,
                               absl::Duration timeout,
                               const TransportSecurity& transport) {
  ClientOptions options;
  options.transport = transport;
  grpc::GenericStub stub(CreateShardChannel(address, options));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const grpc::ByteBuffer request =
      EncodeCheckRequest(kParameterServerServiceName);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, kCheckMethod, grpc::StubOptions(), &request,
                 &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return DecodeServingStatus(response);
}

}  // namespace

absl::Status CheckHealth(const std::string& address, absl::Duration timeout,
                         const TransportSecurity& transport) {
  if (address.empty()) {
    return absl::InvalidArgumentError("health check: empty address");
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("health check of ", address, ": timeout ",
                     absl::FormatDuration(timeout), " is not positive"));
  }
  absl::StatusOr<uint64_t> serving = Check(address, timeout, transport);
  const absl::Status status =
      serving.ok() ? ToStatus(*serving) : serving.status();
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat("health check of ", address, " (",
                   kParameterServerServiceName, "): ", status.message()));
}

}  // namespace gradwire
