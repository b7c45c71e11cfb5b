// The gRPC face of one shard: gradwire.v1.ParameterServer on top of Shard
// (server/shard/shard.h), served with gRPC's callback API and raw byte
// buffers.
//
// Each call goes through the same steps:
//   1. Token (when the service has one): the call's "authorization: Bearer
//      <token>" metadata is checked (common/tls/bearer_token.h) before its
//      bytes are parsed, on gRPC's thread. Refusals: UNAUTHENTICATED (no or
//      a malformed authorization), PERMISSION_DENIED (another token); each
//      is counted in gradwire_shard_auth_refusals_total. A refused call
//      never reaches the shard. grpc.health.v1.Health needs no token. With
//      per-worker tokens (worker_tokens.h), once the request is parsed an
//      Init, Push or Pull naming another worker than the token's is
//      PERMISSION_DENIED too.
//   2. Queue: the call's work goes to a ThreadPool (common/threads/
//      thread_pool.h) with a bounded queue: Init, Push and GetInfo to
//      `handler_threads` threads, Pull to `pull_threads`.
//      A call that finds them busy waits in the queue without a thread, so
//      the threads of a shard stay bounded however many workers wait for a
//      step (each waiting Pull holds one pull thread). Bounds, each answered
//      RESOURCE_EXHAUSTED with the trailing metadata kRetryAfterMetadataKey
//      (the client backs off and retries, as for UNAVAILABLE): at most
//      `max_queued_calls` calls wait in each pool's queue; one connection
//      (its peer address) holds at most `max_calls_per_connection` calls,
//      queued, running or with its answer not yet sent; one puller has at
//      most `max_waiting_pulls_per_worker` Pulls in flight, so that no
//      client can hold every pull thread with Pulls of a step that never
//      comes. A puller is the worker its per-worker token proves, else its
//      connection (never the worker id the request claims), and its place
//      is taken before the Pull is queued for a thread; workers hold a
//      connection each (client/shard_channel.h). With the default
//      --pull-threads (--num-workers times this bound) honest pullers never
//      wait for a thread; without per-worker tokens, a client that opens
//      many connections is bounded by --max-queued-calls and the threads
//      alone.
//   3. Parse: the request's chunk entries and unknown fields are counted
//      on the received bytes first (request_fields.h; a request with more
//      than max_chunk_entries entries is refused unparsed:
//      RESOURCE_EXHAUSTED for Init, INVALID_ARGUMENT for Push and Pull, as
//      the shard would; one with more than kMaxUnknownRequestFields unknown
//      fields, at any depth, is INVALID_ARGUMENT, since protobuf would keep
//      each as an object of its own); then the bytes are parsed here, so
//      bytes that are not a valid message are INVALID_ARGUMENT naming the
//      message type and the size, not gRPC's INTERNAL with an empty
//      message. A Push is read in place instead (common/codec/push_wire.h):
//      its chunks point into the received slices, which the call holds
//      until it finishes, and its entries are counted as they are read.
//   4. Shard call; absl::Status becomes grpc::Status (same code and
//      message). Pull turns the call's deadline into Shard::Pull's: it waits
//      in slices of kPullWaitSlice, so that a cancelled call or a server
//      shutting down is noticed within one slice; without a deadline it
//      waits at most kMaxPullWait.
//   5. The answer is serialized into the call's reply buffer (a Pull's
//      serialized copy is reserved in the shard's memory budget first,
//      memory_budget.h, RESOURCE_EXHAUSTED past it).
//
// Liveness: with a WorkerActivity, only progress is reported
// (worker_liveness.h): a Push the shard applied, a Pull for each slice it
// waited on steps its worker has already pushed, an Init that put its
// worker into the live set, and a worker's first Init. A refused call may
// name any worker and counts for none.
//
// Metrics: the received and sent bytes of each Push and Pull, and each
// Pull's wait, go to the shard's ShardMetrics.
//
// Shutdown: BeginShutdown makes waiting Pulls answer UNAVAILABLE within a
// slice; after grpc::Server::Shutdown returned, StopPools runs what is
// still queued and joins the threads.
//
// Thread safety: every method may be called concurrently.
#ifndef GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_
#define GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/retry_metadata.h"
#include "common/threads/thread_pool.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/process/call_limits.h"
#include "server/process/worker_tokens.h"
#include "server/shard/memory_budget.h"
#include "server/shard/shard.h"
#include "server/shard/worker_liveness.h"

namespace gradwire {

// The longest a Pull waits when its call carries no deadline.
inline constexpr absl::Duration kMaxPullWait = absl::Seconds(60);
// How often a waiting Pull checks for cancellation and shutdown.
inline constexpr absl::Duration kPullWaitSlice = absl::Milliseconds(100);

// The grpc::Status with the code and message of `status`.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The deadline for Shard::Pull: the call's deadline (`call_deadline` as
// grpc::ServerContextBase::deadline() gives it; time_point::max() for none),
// capped at now + kMaxPullWait.
absl::Time PullDeadline(std::chrono::system_clock::time_point call_deadline,
                        absl::Time now);

struct ParameterServerServiceOptions {
  // The bearer token every call must carry; empty: none.
  std::string auth_token;
  // One token per worker (worker_tokens.h); empty: none. When set, Init,
  // Push and Pull must carry the token of the worker they name, and
  // `auth_token` (if any) may only call GetInfo.
  WorkerTokens worker_tokens;
  // Threads for Init, Push and GetInfo, and for Pull (>= 1 each).
  int handler_threads = 4;
  int pull_threads = 64;
  // The bounds of step 2 (>= 1 each).
  int64_t max_queued_calls = 4096;
  int64_t max_calls_per_connection = 256;
  int64_t max_waiting_pulls_per_worker = 8;
  // Most chunk entries an Init, Push or Pull may carry (--max-chunks),
  // counted on the received bytes before they are parsed: parsing a
  // million empty entries would cost the shard hundreds of MB first.
  uint64_t max_chunk_entries = 16384;
};

// Every method of gradwire.v1.ParameterServer as a raw callback method.
using RawParameterServerService =
    v1::ParameterServer::WithRawCallbackMethod_Init<
        v1::ParameterServer::WithRawCallbackMethod_Push<
            v1::ParameterServer::WithRawCallbackMethod_Pull<
                v1::ParameterServer::WithRawCallbackMethod_GetInfo<
                    v1::ParameterServer::Service>>>>;

class ParameterServerService final : public RawParameterServerService {
 public:
  // `shard` and `activity` are not owned and must outlive the service;
  // `activity` may be null (no liveness tracking).
  ParameterServerService(Shard* shard, WorkerActivity* activity,
                         ParameterServerServiceOptions options);
  ~ParameterServerService() override;

  grpc::ServerUnaryReactor* Init(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;

  // Ends waiting: from now on a Pull whose step has not arrived answers
  // UNAVAILABLE after at most kPullWaitSlice, because the pushes it waits
  // for cannot reach a server that is shutting down. Init, Push and Pulls
  // that need no wait still run. Idempotent.
  void BeginShutdown();

  // Runs the queued calls and joins the threads; call after the
  // grpc::Server has shut down. Idempotent.
  void StopPools();

 private:
  // Steps 1 to 5 above for one call: `work` maps the parsed request to the
  // answer on a thread of `pool`.
  template <typename Request, typename Response, typename Work>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response, ThreadPool* pool,
                                  Work work);
  // Serve's steps on the pool thread, up to the answer: parses and
  // authorizes the request, runs `work` and serializes its answer into
  // *response. A pull answer's serialized copy is reserved in the shard's
  // memory budget: *serialized holds it, and the call's reactor keeps it
  // until gRPC is done with the call (the answer sent or the call
  // cancelled), since a client that does not read holds it that long.
  template <typename Request, typename Response, typename Work>
  grpc::Status Handle(grpc::CallbackServerContext* context,
                      const grpc::ByteBuffer& request,
                      std::optional<uint32_t> caller, const Work& work,
                      grpc::ByteBuffer* response, MemoryLease* serialized);

  // Who the call is (a worker id, or nullopt for the shared token or no
  // token required), or the refusal (counted).
  absl::StatusOr<std::optional<uint32_t>> Authenticate(
      const grpc::CallbackServerContext& context) const;
  // With worker tokens: OK when `caller` may act as `worker_id`, else
  // PERMISSION_DENIED (counted).
  grpc::Status Authorize(std::optional<uint32_t> caller,
                         uint32_t worker_id) const;

  // RESOURCE_EXHAUSTED with `message`, and the retry metadata on `context`.
  static grpc::Status Busy(grpc::CallbackServerContext* context,
                           std::string message);
  // `status` for gRPC; a refusal the shard marked RetryLater
  // (common/retry_metadata.h, e.g. its memory budget) gets the retry
  // metadata too.
  static grpc::Status Answer(grpc::CallbackServerContext* context,
                             const absl::Status& status);

  // Pull's loop of waiting slices; adds the time spent waiting to *waited.
  // Each slice waited on other workers is progress of the puller.
  grpc::Status WaitAndPull(grpc::CallbackServerContext* context,
                           const v1::PullRequest& request,
                           v1::PullResponse* response, absl::Duration* waited);

  // Constant after construction.
  Shard* const shard_;
  WorkerActivity* const activity_;
  const std::string auth_token_;
  const WorkerTokens worker_tokens_;
  const uint64_t max_chunk_entries_;

  std::atomic<bool> shutting_down_{false};
  CallLimits<std::string> per_connection_;
  // Pulls in flight per puller (PullerOf: a per-worker token's worker, else
  // the connection).
  CallLimits<std::string> pulls_per_puller_;
  ThreadPool handlers_;
  ThreadPool pulls_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_
