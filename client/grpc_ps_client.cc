#include "client/grpc_ps_client.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/aliased_request.h"
#include "client/message_parts.h"
#include "client/shard_channel.h"
#include "common/retry_metadata.h"
#include "common/threads/thread_pool.h"
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

namespace {

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
absl::Duration Backoff(const ClientOptions& options, int retry) {
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
void WaitBeforeRetry(const ShardConnection& shard, absl::Duration backoff) {
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

// The threads of ForEachShard: none at first, then one more whenever a
// call finds none idle. A Pull that waits for its step holds its thread for
// as long as it waits, so a shard's call never queues behind it; the pool
// grows to the most calls ever in flight at once (a few per shard for a
// worker's push and pull threads) and keeps them.
ThreadPoolOptions CallThreadOptions() {
  ThreadPoolOptions options;
  options.threads = 0;
  options.grow_when_busy = true;
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcPsClient>> GrpcPsClient::Connect(
    std::vector<std::string> shard_addresses, ClientOptions options) {
  if (absl::Status s = ValidateClientOptions(options); !s.ok()) return s;
  if (shard_addresses.empty()) {
    return absl::InvalidArgumentError("no shard addresses");
  }
  auto wire = std::make_shared<WireCounters>();
  std::vector<std::unique_ptr<ShardConnection>> shards;
  for (size_t i = 0; i < shard_addresses.size(); ++i) {
    if (shard_addresses[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the address of shard ", i, " is empty"));
    }
    shards.push_back(std::make_unique<ShardConnection>(
        i, std::move(shard_addresses[i]), options, wire));
  }
  // Start every channel connecting before waiting on the first, so that
  // the shards connect in parallel under one deadline.
  for (const auto& shard : shards) shard->channel()->GetState(true);
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  for (const auto& shard : shards) {
    if (!shard->channel()->WaitForConnected(absl::ToChronoTime(deadline))) {
      return shard->Error(
          absl::StatusCode::kUnavailable,
          absl::StrCat("not reachable within the connect timeout of ",
                       absl::FormatDuration(options.connect_timeout),
                       options.transport.tls()
                           ? " (TLS: is the shard up with TLS, and does its "
                             "certificate chain to --tls-ca, name the "
                             "address and lie within its validity period?)"
                           : ""));
    }
  }
  return std::unique_ptr<GrpcPsClient>(
      new GrpcPsClient(std::move(options), std::move(shards), std::move(wire)));
}

GrpcPsClient::GrpcPsClient(ClientOptions options,
                           std::vector<std::unique_ptr<ShardConnection>> shards,
                           std::shared_ptr<WireCounters> wire)
    : options_(std::move(options)),
      shards_(std::move(shards)),
      wire_(std::move(wire)),
      calls_(std::make_unique<InFlightCalls>()),
      call_threads_(std::make_unique<ThreadPool>(CallThreadOptions())) {}

void GrpcPsClient::CancelCalls() { calls_->CancelAll(); }

GrpcPsClient::~GrpcPsClient() = default;

uint32_t GrpcPsClient::num_shards() const {
  return static_cast<uint32_t>(shards_.size());
}

const std::string& GrpcPsClient::address(uint32_t shard) const {
  return shards_.at(shard)->address();
}

template <typename Request>
absl::StatusOr<std::vector<uint32_t>> GrpcPsClient::ActiveShards(
    const std::vector<Request>& requests) const {
  if (requests.size() != shards_.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d requests for %d shards; pass one per shard",
                        requests.size(), shards_.size()));
  }
  std::vector<uint32_t> active;
  for (uint32_t shard = 0; shard < requests.size(); ++shard) {
    const Request& request = requests[shard];
    if (request.worker_id() != options_.worker_id) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the request for shard %d carries worker id %d but this client is "
          "worker %d",
          shard, request.worker_id(), options_.worker_id));
    }
    if (!request.chunks().empty()) active.push_back(shard);
  }
  return active;
}

absl::Status GrpcPsClient::ForEachShard(
    const std::vector<uint32_t>& shards,
    absl::FunctionRef<absl::Status(uint32_t)> call) {
  std::vector<absl::Status> results(shards.size());
  // The calling thread takes the first shard; kept threads the others.
  call_threads_->ParallelFor(shards.size(),
                             [&](size_t i) { results[i] = call(shards[i]); });
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::Init(const std::vector<v1::InitRequest>& requests,
                                std::vector<v1::InitResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::InitResponse());
  return ForEachShard(*active, [&](uint32_t shard) {
    return InitShard(shard, requests[shard], &(*responses)[shard]);
  });
}

absl::Status GrpcPsClient::InitShard(uint32_t shard,
                                     const v1::InitRequest& request,
                                     v1::InitResponse* response) {
  ShardConnection& connection = *shards_[shard];
  const RpcKind kind{"Init", options_.rpc_timeout, &counters_.init_bytes_sent,
                     &counters_.init_bytes_received};
  const auto call = [&](const v1::InitRequest& message) {
    absl::Status status = CallStubWithRetries(
        connection, options_, kind, &v1::ParameterServer::Stub::Init, message,
        response, &counters_.retries, calls_.get());
    if (status.ok()) connection.LearnShardLimit(response->max_message_bytes());
    return status;
  };
  absl::StatusOr<std::vector<int>> starts =
      InitPartStarts(request, connection.message_limit());
  if (!starts.ok()) {
    return connection.Error(starts.status().code(), starts.status().message());
  }
  if (starts->size() == 1) return call(request);
  // A shard that lost the parts it held (it restarted, or another worker's
  // part 0 replaced a collection it thought abandoned) answers ABORTED: the
  // parts start over, a few times at most.
  constexpr int kMaxStarts = 3;
  for (int attempt = 1;; ++attempt) {
    absl::Status status;
    for (size_t part = 0; part < starts->size(); ++part) {
      status = call(InitPart(request, *starts, part));
      if (!status.ok() || response->values_pending()) break;
    }
    // Another worker is sending its values: the caller waits for them as
    // for an elected provider's (worker/init_exchange.h).
    if (status.ok() && response->values_pending()) return status;
    if (status.ok()) break;
    if (!absl::IsAborted(status) || attempt >= kMaxStarts) return status;
  }
  // The parts' answers carry no versions or fingerprints: the Init without
  // values brings them for every declared chunk, in the request's order.
  return call(WithoutValues(request));
}

absl::Status GrpcPsClient::Push(const std::vector<v1::PushRequest>& requests,
                                std::vector<v1::PushResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::PushResponse());
  const RpcKind kind{"Push", options_.rpc_timeout, &counters_.push_bytes_sent,
                     &counters_.push_bytes_received};
  return ForEachShard(*active, [&](uint32_t shard) {
    const ShardConnection& connection = *shards_[shard];
    const v1::PushRequest& request = requests[shard];
    v1::PushResponse* response = &(*responses)[shard];
    // The bulk bytes go out from `request` itself (AliasedPushStub).
    const auto call = [&](const v1::PushRequest& message,
                          v1::PushResponse* answer) {
      return CallWithRetries<v1::PushRequest, v1::PushResponse>(
          connection, options_, kind, message,
          [&](grpc::ClientContext* context, v1::PushResponse* out) {
            return connection.push_stub().Push(context, message, out);
          },
          answer, &counters_.retries, calls_.get());
    };
    if (request.ByteSizeLong() + kMessageMarginBytes <=
        connection.message_limit()) {
      return call(request, response);
    }
    absl::StatusOr<std::vector<v1::PushRequest>> parts =
        SplitPush(request, connection.message_limit());
    if (!parts.ok()) {
      return connection.Error(parts.status().code(), parts.status().message());
    }
    // One after another, the acks in the request's order.
    for (const v1::PushRequest& part : *parts) {
      v1::PushResponse answer;
      if (absl::Status s = call(part, &answer); !s.ok()) return s;
      for (v1::ChunkAck& ack : *answer.mutable_acks()) {
        *response->add_acks() = std::move(ack);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status GrpcPsClient::Pull(const std::vector<v1::PullRequest>& requests,
                                std::vector<v1::PullResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::PullResponse());
  return ForEachShard(*active, [&](uint32_t shard) {
    return PullShard(shard, requests[shard], &(*responses)[shard]);
  });
}

absl::Status GrpcPsClient::PullShard(uint32_t shard,
                                     const v1::PullRequest& request,
                                     v1::PullResponse* response) {
  const ShardConnection& connection = *shards_[shard];
  const RpcKind kind{"Pull", options_.pull_timeout, &counters_.pull_bytes_sent,
                     &counters_.pull_bytes_received};
  v1::PullRequest rest = request;
  rest.set_allow_partial(true);
  response->Clear();
  // A shard that restarts between two rounds answers from another history:
  // the rounds start over, a few times at most.
  constexpr int kMaxStarts = 3;
  for (int starts = 1;;) {
    v1::PullResponse round;
    if (absl::Status s = CallStubWithRetries(
            connection, options_, kind, &v1::ParameterServer::Stub::Pull, rest,
            &round, &counters_.retries, calls_.get());
        !s.ok()) {
      return s;
    }
    const bool first_round = response->chunks().empty();
    if (!first_round && round.history_epoch() != response->history_epoch()) {
      if (++starts > kMaxStarts) {
        return connection.Error(
            absl::StatusCode::kUnavailable,
            "Pull: the shard's history changed between the rounds of a pull "
            "too large for one message; pull again");
      }
      response->Clear();
      rest = request;
      rest.set_allow_partial(true);
      continue;
    }
    response->set_history_epoch(round.history_epoch());
    const int answered = round.chunks_size();
    for (v1::ChunkWeights& chunk : *round.mutable_chunks()) {
      *response->add_chunks() = std::move(chunk);
    }
    if (!round.partial()) return absl::OkStatus();
    if (answered == 0 || answered >= rest.chunks_size()) {
      return connection.Error(absl::StatusCode::kInternal,
                              "Pull: a partial answer answered no chunk");
    }
    rest.mutable_chunks()->DeleteSubrange(0, answered);
  }
}

TrafficStats GrpcPsClient::traffic() const {
  const auto load = [](const std::atomic<uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  };
  TrafficStats stats;
  stats.init_bytes_sent = load(counters_.init_bytes_sent);
  stats.init_bytes_received = load(counters_.init_bytes_received);
  stats.push_bytes_sent = load(counters_.push_bytes_sent);
  stats.push_bytes_received = load(counters_.push_bytes_received);
  stats.pull_bytes_sent = load(counters_.pull_bytes_sent);
  stats.pull_bytes_received = load(counters_.pull_bytes_received);
  stats.retries = load(counters_.retries);
  return stats;
}

WireTotals GrpcPsClient::wire_bytes() const { return wire_->Snapshot(); }

}  // namespace gradwire
