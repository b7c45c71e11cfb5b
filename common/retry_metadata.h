// How a shard tells a client that it refused a call only because it was
// busy (a full queue, a connection or a worker past its share, a memory
// budget that a later call will find room in): RESOURCE_EXHAUSTED with the
// trailing metadata kRetryAfterMetadataKey is worth retrying after the
// milliseconds it holds, unlike a RESOURCE_EXHAUSTED for a request that is
// too large, which would fail again. Inside the shard such an
// absl::Status carries the payload kRetryLaterPayload, which the gRPC
// service turns into the metadata. Shared by the server
// (server/process/parameter_server_service.h, server/shard/) and the client
// (client/grpc_ps_client.h).
#ifndef GRADWIRE_COMMON_RETRY_METADATA_H_
#define GRADWIRE_COMMON_RETRY_METADATA_H_

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace gradwire {

inline constexpr char kRetryAfterMetadataKey[] = "gradwire-retry-after-ms";
inline constexpr char kRetryLaterPayload[] = "type.gradwire/retry-later";

// Marks `status` (not OK) as a refusal that a later attempt may pass.
inline absl::Status RetryLater(absl::Status status) {
  status.SetPayload(kRetryLaterPayload, absl::Cord());
  return status;
}

// Whether `status` was marked by RetryLater.
inline bool IsRetryLater(const absl::Status& status) {
  return status.GetPayload(kRetryLaterPayload).has_value();
}

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_RETRY_METADATA_H_
