// The worker's view of the parameter servers: Init, Push and Pull across all
// shards. Implementations: GrpcPsClient (grpc_ps_client.h) over real shards,
// and an in-memory fake for unit tests (tests/worker/fake_ps_client.h).
#ifndef GRADWIRE_CLIENT_PS_CLIENT_H_
#define GRADWIRE_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "client/wire_totals.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

// Serialized bytes that went over the wire, by direction and RPC: the
// protobuf size of every request attempt sent and of every response
// received (gRPC and HTTP/2 framing not included). `retries` counts
// attempts after the first, over all shards and RPCs.
struct TrafficStats {
  uint64_t init_bytes_sent = 0;
  uint64_t init_bytes_received = 0;
  uint64_t push_bytes_sent = 0;
  uint64_t pull_bytes_sent = 0;
  uint64_t push_bytes_received = 0;
  uint64_t pull_bytes_received = 0;
  uint64_t retries = 0;
};

// All methods take one request per shard (index = shard id; an empty
// request, with no chunks, is skipped) and fill one response per shard.
// Requests to different shards run in parallel. Every call has a deadline
// (the implementation's options); retries on UNAVAILABLE are safe because
// pushes carry the exactly-once key (worker, step, chunk).
//
// Thread safety: calls may run concurrently from different threads (a
// worker pulls the chunks it has pushed while it pushes others); each call
// waits for its own answers only.
class PsClient {
 public:
  virtual ~PsClient() = default;

  virtual uint32_t num_shards() const = 0;

  virtual absl::Status Init(const std::vector<v1::InitRequest>& requests,
                            std::vector<v1::InitResponse>* responses) = 0;
  virtual absl::Status Push(const std::vector<v1::PushRequest>& requests,
                            std::vector<v1::PushResponse>* responses) = 0;
  virtual absl::Status Pull(const std::vector<v1::PullRequest>& requests,
                            std::vector<v1::PullResponse>* responses) = 0;

  // Totals since construction.
  virtual TrafficStats traffic() const = 0;

  // The TCP stream bytes of this client's connections since construction,
  // as the kernel counts them (wire_totals.h, wire_counters.h): framing,
  // headers and TLS included, so at least the payload of traffic() once
  // acknowledged. Unknown (WireTotals::known false) where the transport cannot
  // say (Unix sockets, in-memory clients: the default). Reads the kernel's
  // counters: a few system calls per connection, fine once per step.
  virtual WireTotals wire_bytes() const { return WireTotals(); }

  // For teardown: makes the calls in flight end now (CANCELLED) and every
  // later call fail, so that nothing waits out its deadline (a BSP pull
  // may wait minutes for a worker that is gone). An implementation that
  // cannot cancel lets its calls run to their deadlines.
  virtual void CancelCalls() {}
};

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_PS_CLIENT_H_
