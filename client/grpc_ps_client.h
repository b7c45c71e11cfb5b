// GrpcPsClient: the PsClient over gRPC, one channel per shard.
//
//   ClientOptions options;
//   options.worker_id = 3;
//   absl::StatusOr<std::unique_ptr<GrpcPsClient>> client =
//       GrpcPsClient::Connect({"ps-0:7000", "ps-1:7000"}, options);
//
// Each call fans out to the shards whose request is not empty, one thread
// per shard (the calling thread takes one of them), and waits for all of
// them. Every RPC attempt carries a deadline: `rpc_timeout` for Init and
// Push, `pull_timeout` for Pull (a BSP pull waits for the slowest worker).
//
// Retries: an attempt that fails with UNAVAILABLE is retried after an
// exponential backoff with jitter, up to `max_attempts` attempts in all;
// every retry is counted in TrafficStats::retries. UNAVAILABLE is the only
// code gRPC uses for "the call did not reach a serving shard" (connection
// refused or reset, shard restarting or shutting down), and all three RPCs
// are safe to repeat (Init is idempotent, Push carries the exactly-once key,
// Pull only reads). A RESOURCE_EXHAUSTED that carries the shard's retry
// metadata (common/retry_metadata.h: it was busy, its queue full or this
// connection or worker past its share) is retried the same way. Other codes
// are not retried: the shard's own answers (INVALID_ARGUMENT,
// FAILED_PRECONDITION, OUT_OF_RANGE, a RESOURCE_EXHAUSTED for a request too
// large) would be the same again, and DEADLINE_EXCEEDED means the budget the
// caller chose is spent -- on a Pull it usually means a peer worker stopped
// pushing, which retrying would only hide for another `pull_timeout`.
//
// Large messages: nothing is sent over the smaller of the client's
// max_message_bytes and the shard's (learnt from its first Init answer).
// An Init whose values do not fit goes in parts, a push that does not fit
// as several pushes of the same step (client/message_parts.h), and a pull
// whose answer would not fit comes back in rounds (PullRequest.
// allow_partial), each a separate RPC under the rules above.
//
// Errors keep the gRPC code; the message names the shard and its address:
//   "shard 1 (10.0.0.7:7000): Push: chunk 5 is not owned by shard 1"
// When several shards fail, the error of the lowest shard id is returned.
//
// Traffic: bytes sent are request.ByteSizeLong() per attempt (a retried
// request counts again), bytes received are response.ByteSizeLong() of each
// successful call. These are serialized protobuf sizes, without gRPC and
// HTTP/2 framing. wire_bytes() is what the kernel counted on the
// client's TCP connections (wire_counters.h), reconnections included.
//
// Thread safety: Init, Push and Pull may run concurrently (PsClient's
// contract: the stubs are thread-safe and the counters atomic); traffic(),
// wire_bytes(), num_shards() and address() are safe at any time.
#ifndef GRADWIRE_CLIENT_GRPC_PS_CLIENT_H_
#define GRADWIRE_CLIENT_GRPC_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client_options.h"
#include "client/ps_client.h"

namespace gradwire {

// One shard's channel and stub; defined in grpc_ps_client.cc so that this
// header stays free of gRPC.
class ShardConnection;
// The RPC attempts in flight, for CancelCalls; defined in grpc_ps_client.cc.
class InFlightCalls;
// The threads of ForEachShard (common/threads/thread_pool.h).
class ThreadPool;
// The kernel's byte counters of the shards' sockets (wire_counters.h).
class WireCounters;

class GrpcPsClient final : public PsClient {
 public:
  // Opens one channel per address (shard id = index) and waits, up to
  // options.connect_timeout in total, until every channel is ready.
  // INVALID_ARGUMENT for bad options or an empty address list; UNAVAILABLE
  // naming the first shard (and address) that is not ready in time.
  static absl::StatusOr<std::unique_ptr<GrpcPsClient>> Connect(
      std::vector<std::string> shard_addresses, ClientOptions options);

  ~GrpcPsClient() override;
  GrpcPsClient(const GrpcPsClient&) = delete;
  GrpcPsClient& operator=(const GrpcPsClient&) = delete;

  uint32_t num_shards() const override;
  // The address of shard `shard`; requires shard < num_shards().
  const std::string& address(uint32_t shard) const;
  const ClientOptions& options() const { return options_; }

  // `requests` must hold num_shards() entries, each with this client's
  // worker id (INVALID_ARGUMENT otherwise, before anything is sent).
  // `responses` is resized to num_shards(); the entry of a skipped (empty)
  // request is left empty. On error the responses are unspecified.
  absl::Status Init(const std::vector<v1::InitRequest>& requests,
                    std::vector<v1::InitResponse>* responses) override;
  absl::Status Push(const std::vector<v1::PushRequest>& requests,
                    std::vector<v1::PushResponse>* responses) override;
  absl::Status Pull(const std::vector<v1::PullRequest>& requests,
                    std::vector<v1::PullResponse>* responses) override;

  TrafficStats traffic() const override;
  // Over every shard's connections (one WireCounters for the client).
  WireTotals wire_bytes() const override;

  // Every attempt in flight ends at once with CANCELLED, and every later
  // call fails with CANCELLED before anything is sent (no retry).
  void CancelCalls() override;

 private:
  // Counters behind TrafficStats, updated by the per-shard threads.
  struct Counters {
    std::atomic<uint64_t> init_bytes_sent{0};
    std::atomic<uint64_t> init_bytes_received{0};
    std::atomic<uint64_t> push_bytes_sent{0};
    std::atomic<uint64_t> push_bytes_received{0};
    std::atomic<uint64_t> pull_bytes_sent{0};
    std::atomic<uint64_t> pull_bytes_received{0};
    std::atomic<uint64_t> retries{0};
  };

  GrpcPsClient(ClientOptions options,
               std::vector<std::unique_ptr<ShardConnection>> shards,
               std::shared_ptr<WireCounters> wire);

  // One shard's Init: in parts when its values do not fit one message
  // (client/message_parts.h), then the Init without values for the answer.
  // A part answered values_pending (another worker is sending its parts)
  // ends it with that answer; parts refused ABORTED start over.
  absl::Status InitShard(uint32_t shard, const v1::InitRequest& request,
                         v1::InitResponse* response);
  // One shard's Pull, in rounds (PullRequest.allow_partial) while the
  // shard answers only the first chunks; the answer holds every chunk of
  // `request` in its order, from one history epoch.
  absl::Status PullShard(uint32_t shard, const v1::PullRequest& request,
                         v1::PullResponse* response);

  // Checks that there is one request per shard, each with this worker's
  // id; returns the shards whose request has chunks.
  template <typename Request>
  absl::StatusOr<std::vector<uint32_t>> ActiveShards(
      const std::vector<Request>& requests) const;

  // Runs `call(shard)` for every shard in `shards` in parallel (on
  // call_threads_ and the calling thread) and returns the error of the
  // lowest shard that failed, if any.
  absl::Status ForEachShard(const std::vector<uint32_t>& shards,
                            absl::FunctionRef<absl::Status(uint32_t)> call);

  // Constant after construction.
  const ClientOptions options_;
  const std::vector<std::unique_ptr<ShardConnection>> shards_;
  // Thread-safe; the shards' channels count into it.
  const std::shared_ptr<WireCounters> wire_;

  // Atomic; safe to read at any time.
  Counters counters_;
  // Thread-safe.
  const std::unique_ptr<InFlightCalls> calls_;
  const std::unique_ptr<ThreadPool> call_threads_;
};

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_GRPC_PS_CLIENT_H_
