// A health check of one shard through the standard grpc.health.v1.Health
// service, for the command line (`gradwire health`, cli/) and for
// scripts that wait until a shard is up.
#ifndef GRADWIRE_CLIENT_HEALTH_CLIENT_H_
#define GRADWIRE_CLIENT_HEALTH_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/tls/transport_security.h"

namespace gradwire {

// The service name the shards report on (gradwire.v1.ParameterServer).
inline constexpr char kParameterServerServiceName[] =
    "gradwire.v1.ParameterServer";

// Asks the server at `address` ("host:port") whether
// kParameterServerServiceName is SERVING, waiting at most `timeout` (> 0)
// for the answer. One attempt, no retries. `transport` (a client's, see
// ClientOptions::transport) must match the shard's: over TLS a failed
// handshake is UNAVAILABLE. The health service needs no token; one in
// `transport` is sent anyway.
//
// Returns OK when it is SERVING. Otherwise the message names the address:
//   UNAVAILABLE        the server answered NOT_SERVING (it is shutting
//                      down), or could not be reached;
//   NOT_FOUND          the server does not know the service (not a shard);
//   DEADLINE_EXCEEDED  no answer within `timeout`;
//   INVALID_ARGUMENT   an empty address or a timeout <= 0;
//   other codes        as the server or gRPC returned them.
//
// Thread safety: safe to call concurrently; each call opens its own
// channel.
absl::Status CheckHealth(const std::string& address, absl::Duration timeout,
                         const TransportSecurity& transport = {});

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_HEALTH_CLIENT_H_
