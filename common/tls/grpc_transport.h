// TransportSecurity (transport_security.h) turned into gRPC objects: server
// and channel credentials, channels that send the bearer token, and the
// server's check of a call's token.
//
// The token travels as per-call metadata added by a client interceptor, not
// as call credentials: gRPC sends call credentials only over TLS, and a
// token must also guard plaintext shards. On the server the check is a
// function that the service runs first in every method, before it parses
// the request (see server/process/parameter_server_service.h), because an
// AuthMetadataProcessor is never invoked on insecure server credentials.
//
// Thread safety: the functions are safe to call concurrently; the
// credentials and channels are gRPC's thread-safe objects.
#ifndef GRADWIRE_COMMON_TLS_GRPC_TRANSPORT_H_
#define GRADWIRE_COMMON_TLS_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tls/transport_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace gradwire {

// Insecure credentials for plaintext; otherwise TLS with `security`'s
// certificate, and with client certificates requested and verified against
// its CA when it has one (required with require_client_cert).
// Requires security.role == kServer.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security);

// Insecure credentials for plaintext; otherwise TLS that verifies the server
// against security.ca_pem and presents the client certificate if there is
// one. Requires security.role == kClient.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security);

// A channel to `address` with ChannelCredentialsFor(security), `arguments`
// plus the server-name override (security.server_name), and, when there is
// a token, an interceptor that adds "authorization: Bearer <token>" to every
// call (health checks included). Requires security.role == kClient.
std::shared_ptr<grpc::Channel> CreateSecureChannel(
    const std::string& address, const TransportSecurity& security,
    grpc::ChannelArguments arguments);

// CheckBearerAuthorization (bearer_token.h) on the "authorization" metadata
// of `context`'s call. More than one authorization value is
// UNAUTHENTICATED.
absl::Status CheckCallAuthorization(const grpc::ServerContextBase& context,
                                    absl::string_view expected_token);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_TLS_GRPC_TRANSPORT_H_
