// The one place that opens a gRPC channel to a shard. Both the client
// (grpc_ps_client.h) and the health check (health_client.h) go through it,
// so that transport security is chosen here alone.
#ifndef GRADWIRE_CLIENT_SHARD_CHANNEL_H_
#define GRADWIRE_CLIENT_SHARD_CHANNEL_H_

#include <memory>
#include <string>

#include "client/client_options.h"
#include "client/wire_counters.h"
#include "grpcpp/channel.h"

namespace gradwire {

// A channel to `address` ("host:port") with options.transport's credentials
// (plaintext, TLS or mutual TLS) and bearer token (sent with every call,
// see common/tls/grpc_transport.h), message
// limits of options.max_message_bytes in both directions, and a reconnect
// backoff between options.initial_backoff and options.max_backoff.
// Requires ValidateClientOptions(options).ok(). The channel starts idle; it
// connects on the first call or GetState(true). It never shares a
// connection with another channel: a shard without per-worker tokens
// counts a worker's pulls by connection (parameter_server_service.h).
// With `wire`, every socket the channel opens is counted there
// (wire_counters.h).
std::shared_ptr<grpc::Channel> CreateShardChannel(
    const std::string& address, const ClientOptions& options,
    std::shared_ptr<WireCounters> wire = nullptr);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_SHARD_CHANNEL_H_
