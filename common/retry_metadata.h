// The trailing metadata by which a shard tells a client that it refused a
// call only because it was busy (a full queue, a connection or a worker
// past its share): RESOURCE_EXHAUSTED with this key is worth retrying after
// the milliseconds it holds, unlike a RESOURCE_EXHAUSTED for a request that
// is too large, which would fail again. Shared by the server
// (server/process/parameter_server_service.h) and the client
// (client/grpc_ps_client.h).
#ifndef GRADWIRE_COMMON_RETRY_METADATA_H_
#define GRADWIRE_COMMON_RETRY_METADATA_H_

namespace gradwire {

inline constexpr char kRetryAfterMetadataKey[] = "gradwire-retry-after-ms";

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_RETRY_METADATA_H_
