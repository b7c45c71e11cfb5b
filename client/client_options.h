// How a worker talks to the shards: deadlines, retries, message limits,
// transport security and the worker id every request carries. Read by
// GrpcPsClient (grpc_ps_client.h), the shard channels (shard_channel.h) and,
// embedded in SyncOptions, by ParameterSync::Connect.
//
// Thread safety: plain values and a pure function.
#ifndef GRADWIRE_CLIENT_CLIENT_OPTIONS_H_
#define GRADWIRE_CLIENT_CLIENT_OPTIONS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/tls/transport_security.h"

namespace gradwire {

struct ClientOptions {
  // Deadline of each Init and Push attempt; > 0.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Deadline of each Pull attempt, which includes the time the shard waits
  // for the requested step; > 0.
  absl::Duration pull_timeout = absl::Seconds(120);
  // Attempts per shard request, the first included; >= 1 (1: no retries).
  int max_attempts = 8;
  // Backoff before the first retry; it doubles with each retry up to
  // `max_backoff`, and each sleep is drawn uniformly from [b/2, b]. Also
  // bounds the channel's own reconnect backoff, so a restarted shard is
  // found again within about `max_backoff`. 0 < initial <= max.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // How long Connect waits for every channel to become ready; > 0.
  absl::Duration connect_timeout = absl::Seconds(30);
  // Largest message sent or received, in [1 KiB, 2 GiB - 1]; match the
  // shards' --max-message-bytes.
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // This worker's id. Every request must carry it (INVALID_ARGUMENT
  // otherwise): a push under another worker's id would defeat the shard's
  // exactly-once bookkeeping.
  uint32_t worker_id = 0;
  // TLS, the client certificate and the bearer token, read by
  // LoadTransportSecurity(files, TransportRole::kClient); the default is
  // plaintext without a token. A TLS handshake that fails (unknown CA,
  // expired or misnamed certificate, client certificate refused) leaves the
  // channel unready: Connect reports UNAVAILABLE after connect_timeout.
  TransportSecurity transport;
};

// INVALID_ARGUMENT naming the first field outside the ranges above.
absl::Status ValidateClientOptions(const ClientOptions& options);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_CLIENT_OPTIONS_H_
