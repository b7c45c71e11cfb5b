// The calls of GrpcPsClient on one shard (internal to client/): the
// shard's channel and stubs, the attempts in flight, and one RPC with its
// retries (see grpc_ps_client.h for the rules). Shared by
// grpc_ps_client.cc and grpc_ps_client_rounds.cc; it holds gRPC, so it is
// included by no header.
#ifndef GRADWIRE_CLIENT_SHARD_CALLS_H_
#define GRADWIRE_CLIENT_SHARD_CALLS_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/aliased_request.h"
#include "client/client_options.h"
#include "client/shard_channel.h"
#include "common/retry_metadata.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace gradwire {

class ShardConnection {
 public:
  ShardConnection(uint32_t shard_id, std::string address,
                  const ClientOptions& options,
                  std::shared_ptr<WireCounters> wire)
      : shard_id_(shard_id),
        address_(std::move(address)),
        channel_(CreateShardChannel(address_, options, std::move(wire))),
        stub_(v1::ParameterServer::NewStub(channel_)),
        push_stub_(channel_),
        own_limit_(options.max_message_bytes),
        limit_(options.max_message_bytes) {}

  uint32_t shard_id() const { return shard_id_; }
  const std::string& address() const { return address_; }
  grpc::Channel* channel() const { return channel_.get(); }
  v1::ParameterServer::Stub* stub() const { return stub_.get(); }
  const AliasedPushStub& push_stub() const { return push_stub_; }

  // The largest message this shard and this client both take: the client's
  // own limit until an Init answer told the shard's
  // (InitResponse.max_message_bytes).
  uint64_t message_limit() const {
    return limit_.load(std::memory_order_relaxed);
  }
  void LearnShardLimit(uint64_t shard_limit) {
    if (shard_limit == 0) return;
    limit_.store(std::min(own_limit_, shard_limit), std::memory_order_relaxed);
  }

  // "shard 1 (10.0.0.7:7000): <message>" with `code`.
  absl::Status Error(absl::StatusCode code, absl::string_view message) const {
    return absl::Status(code, absl::StrCat("shard ", shard_id_, " (", address_,
                                           "): ", message));
  }

 private:
  const uint32_t shard_id_;
  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::ParameterServer::Stub> stub_;
  const AliasedPushStub push_stub_;
  const uint64_t own_limit_;
  std::atomic<uint64_t> limit_;
};

// The contexts of the attempts in flight, so that CancelCalls can reach
// them; once cancelled, every later attempt is refused before it starts.
class InFlightCalls {
 public:
  // False after CancelAll: the attempt must not start.
  bool Add(grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return false;
    contexts_.insert(context);
    return true;
  }
  void Remove(grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    contexts_.erase(context);
  }
  void CancelAll() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (grpc::ClientContext* context : contexts_) context->TryCancel();
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// One attempt of an RPC on a shard: its call with a fresh context.
template <typename Response>
using Attempt =
    absl::FunctionRef<grpc::Status(grpc::ClientContext*, Response*)>;

// One RPC kind: its name for messages, its deadline, and its byte counters.
struct RpcKind {
  absl::string_view name;
  absl::Duration timeout;
  std::atomic<uint64_t>* bytes_sent;
  std::atomic<uint64_t>* bytes_received;
};

// The sleep before retry number `retry` (1-based): the exponential backoff
// b = min(initial * 2^(retry-1), max), jittered uniformly into [b/2, b] so
// that workers that lost the same shard do not come back in lockstep.
inline absl::Duration Backoff(const ClientOptions& options, int retry) {
  absl::Duration backoff = options.initial_backoff;
  for (int i = 1; i < retry && backoff < options.max_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, options.max_backoff);
  absl::BitGen random;  // Seeded per retry: off the path of calls that succeed.
  return backoff * absl::Uniform(random, 0.5, 1.0);
}

// Waits `backoff` while watching the shard's channel. A plain sleep would
// leave the channel unpolled: a reconnect attempt that gRPC starts in the
// background (after its own reconnect backoff) would then complete only at
// gRPC's 5 s backup poll, so a restarted shard would look down for seconds
// longer than it is. Waiting on the channel's state drives its I/O.
inline void WaitBeforeRetry(const ShardConnection& shard,
                            absl::Duration backoff) {
  const absl::Time until = absl::Now() + backoff;
  shard.channel()->WaitForConnected(absl::ToChronoTime(until));
  // Ready early: still wait the whole backoff, so that a shard that answers
  // UNAVAILABLE on a healthy connection (while shutting down) is not hit in
  // a tight loop.
  absl::SleepFor(until - absl::Now());
}

// Sends `request` to `shard` with `call`, retrying UNAVAILABLE and a busy
// shard's RESOURCE_EXHAUSTED (see the header).
template <typename Request, typename Response>
absl::Status CallWithRetries(const ShardConnection& shard,
                             const ClientOptions& options, const RpcKind& kind,
                             const Request& request, Attempt<Response> call,
                             Response* response, std::atomic<uint64_t>* retries,
                             InFlightCalls* calls) {
  const uint64_t request_bytes = request.ByteSizeLong();
  grpc::Status status;
  int attempt = 1;
  for (;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kind.timeout));
    if (!calls->Add(&context)) {
      return shard.Error(absl::StatusCode::kCancelled,
                         absl::StrCat(kind.name, ": the client was cancelled"));
    }
    kind.bytes_sent->fetch_add(request_bytes, std::memory_order_relaxed);
    response->Clear();
    status = call(&context, response);
    calls->Remove(&context);
    if (status.ok()) {
      kind.bytes_received->fetch_add(response->ByteSizeLong(),
                                     std::memory_order_relaxed);
      return absl::OkStatus();
    }
    // A shard that was only busy says so (common/retry_metadata.h).
    const bool busy =
        status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
        context.GetServerTrailingMetadata().count(kRetryAfterMetadataKey) > 0;
    if ((status.error_code() != grpc::StatusCode::UNAVAILABLE && !busy) ||
        attempt >= options.max_attempts) {
      break;
    }
    retries->fetch_add(1, std::memory_order_relaxed);
    WaitBeforeRetry(shard, Backoff(options, attempt));
  }
  std::string message = absl::StrCat(kind.name, ": ", status.error_message());
  if (attempt > 1) absl::StrAppend(&message, " (after ", attempt, " attempts)");
  return shard.Error(static_cast<absl::StatusCode>(status.error_code()),
                     message);
}

template <typename Request, typename Response>
using StubMethod = grpc::Status (v1::ParameterServer::Stub::*)(
    grpc::ClientContext*, const Request&, Response*);

// CallWithRetries through the generated stub's `method`.
template <typename Request, typename Response>
absl::Status CallStubWithRetries(const ShardConnection& shard,
                                 const ClientOptions& options,
                                 const RpcKind& kind,
                                 StubMethod<Request, Response> method,
                                 const Request& request, Response* response,
                                 std::atomic<uint64_t>* retries,
                                 InFlightCalls* calls) {
  return CallWithRetries<Request, Response>(
      shard, options, kind, request,
      [&](grpc::ClientContext* context, Response* out) {
        return (shard.stub()->*method)(context, request, out);
      },
      response, retries, calls);
}

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_SHARD_CALLS_H_
