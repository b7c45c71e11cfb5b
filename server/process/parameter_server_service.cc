#include "server/process/parameter_server_service.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/push_wire.h"
#include "common/retry_metadata.h"
#include "common/tls/bearer_token.h"
#include "server/process/request_parsing.h"
#include "server/shard/memory_budget.h"

namespace gradwire {
namespace {

template <typename Response>
grpc::Status SerializeResponse(const Response& response,
                               grpc::ByteBuffer* out) {
  bool own_buffer = false;
  return grpc::SerializationTraits<Response>::Serialize(response, out,
                                                        &own_buffer);
}

// A pool of `threads` (at least 1) fixed threads whose queue holds at most
// `max_queued` calls.
ThreadPoolOptions CallPoolOptions(int threads, int64_t max_queued) {
  ThreadPoolOptions options;
  options.threads = std::max(1, threads);
  options.max_queued = max_queued;
  return options;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code).
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Time PullDeadline(std::chrono::system_clock::time_point call_deadline,
                        absl::Time now) {
  const absl::Time cap = now + kMaxPullWait;
  if (call_deadline == std::chrono::system_clock::time_point::max()) return cap;
  return std::min(absl::FromChrono(call_deadline), cap);
}

ParameterServerService::ParameterServerService(
    Shard* shard, WorkerActivity* activity,
    ParameterServerServiceOptions options)
    : shard_(shard),
      activity_(activity),
      auth_token_(std::move(options.auth_token)),
      worker_tokens_(std::move(options.worker_tokens)),
      max_chunk_entries_(options.max_chunk_entries),
      per_connection_(options.max_calls_per_connection),
      pulls_per_puller_(options.max_waiting_pulls_per_worker),
      handlers_(
          CallPoolOptions(options.handler_threads, options.max_queued_calls)),
      pulls_(CallPoolOptions(options.pull_threads, options.max_queued_calls)) {}

grpc::Status ParameterServerService::Busy(grpc::CallbackServerContext* context,
                                          std::string message) {
  context->AddTrailingMetadata(kRetryAfterMetadataKey, "100");
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::move(message));
}

grpc::Status ParameterServerService::Answer(
    grpc::CallbackServerContext* context, const absl::Status& status) {
  if (IsRetryLater(status)) {
    context->AddTrailingMetadata(kRetryAfterMetadataKey, "100");
  }
  return ToGrpcStatus(status);
}

ParameterServerService::~ParameterServerService() { StopPools(); }

absl::StatusOr<std::optional<uint32_t>> ParameterServerService::Authenticate(
    const grpc::CallbackServerContext& context) const {
  if (auth_token_.empty() && worker_tokens_.tokens.empty()) {
    return std::optional<uint32_t>();
  }
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range(kAuthorizationMetadataKey);
  absl::StatusOr<std::optional<uint32_t>> caller;
  if (first != last && std::next(first) != last) {
    caller = absl::UnauthenticatedError(
        "more than one 'authorization' metadata value");
  } else {
    absl::optional<absl::string_view> value;
    if (first != last)
      value.emplace(first->second.data(), first->second.size());
    caller = IdentifyCaller(value, auth_token_, worker_tokens_);
  }
  if (!caller.ok()) shard_->metrics().CountAuthRefusal(caller.status().code());
  return caller;
}

grpc::Status ParameterServerService::Authorize(std::optional<uint32_t> caller,
                                               uint32_t worker_id) const {
  if (worker_tokens_.tokens.empty() || caller == worker_id) {
    return grpc::Status::OK;
  }
  shard_->metrics().CountAuthRefusal(absl::StatusCode::kPermissionDenied);
  if (!caller.has_value()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrFormat("the job's shared token may only call "
                                        "GetInfo here; worker %d needs its own "
                                        "(--worker-tokens-file)",
                                        worker_id));
  }
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrFormat("the token of worker %d cannot act as worker %d", *caller,
                      worker_id));
}

template <typename Request, typename Response, typename Work>
grpc::Status ParameterServerService::Handle(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
    std::optional<uint32_t> caller, const Work& work,
    grpc::ByteBuffer* response, MemoryLease* serialized) {
  constexpr bool kPush = std::is_same_v<Request, ReceivedPush>;
  PushStageClock clock(&shard_->metrics());
  Request parsed;
  Response answer;
  grpc::Status status = Parse(request, Request::descriptor()->name().c_str(),
                              max_chunk_entries_, &parsed);
  if constexpr (!std::is_same_v<Request, v1::GetInfoRequest>) {
    if (status.ok()) status = Authorize(caller, parsed.worker_id());
  }
  if constexpr (kPush) clock.Lap(PushStage::kParse);
  if (status.ok()) status = work(context, parsed, request.Length(), &answer);
  // The shard times its own stages.
  if constexpr (kPush) clock = PushStageClock(&shard_->metrics());
  // A pull answer is serialized while it is still held: its copy is
  // reserved in the shard's memory budget until the call is answered.
  if constexpr (std::is_same_v<Response, v1::PullResponse>) {
    if (status.ok()) {
      absl::StatusOr<MemoryLease> lease = shard_->memory_budget().Reserve(
          answer.ByteSizeLong(), "serialized pull answer");
      if (lease.ok()) {
        *serialized = *std::move(lease);
      } else {
        status = Answer(context, lease.status());
      }
    }
  }
  if (status.ok()) status = SerializeResponse(answer, response);
  if constexpr (kPush) clock.Lap(PushStage::kRespond);
  return status;
}

namespace {

// Who a Pull's place is counted against: the worker its per-worker token
// proves, else its connection. Not the worker id in the request, which any
// client can claim (and so take an honest worker's places), nor anything
// parsed, since the place is taken before the call has a thread.
std::string PullerOf(std::optional<uint32_t> caller, const std::string& peer) {
  return caller.has_value() ? absl::StrFormat("worker %d", *caller)
                            : absl::StrCat("connection ", peer);
}

// A unary call's reactor that keeps what its answer needs until gRPC is
// done with the call (OnDone: the answer sent, or the call cancelled), not
// only until Finish: a client that does not read its answers keeps them in
// this process's memory, so their budget lease and the connection's call
// slot must last as long.
class AnswerReactor final : public grpc::ServerUnaryReactor {
 public:
  // Runs `on_done` (if set) in OnDone; call before Finish.
  void set_on_done(std::function<void()> on_done) {
    on_done_ = std::move(on_done);
  }
  // Holds `lease` until OnDone; call before Finish.
  void Keep(MemoryLease lease) { lease_ = std::move(lease); }

  void OnDone() override {
    lease_.Release();
    if (on_done_) on_done_();
    delete this;
  }

 private:
  MemoryLease lease_;
  std::function<void()> on_done_;
};

}  // namespace

template <typename Request, typename Response, typename Work>
grpc::ServerUnaryReactor* ParameterServerService::Serve(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, ThreadPool* pool, Work work) {
  auto* reactor = new AnswerReactor();
  absl::StatusOr<std::optional<uint32_t>> caller = Authenticate(*context);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  // A connection's place is taken until gRPC is done with its call.
  std::string peer = context->peer();
  if (!per_connection_.TryAcquire(peer)) {
    reactor->Finish(Busy(
        context, absl::StrFormat("this connection already has %d calls in "
                                 "flight on the shard "
                                 "(--max-calls-per-connection); retry later",
                                 per_connection_.cap())));
    return reactor;
  }
  reactor->set_on_done([this, peer] { per_connection_.Release(peer); });
  // A Pull's place among its puller's is taken before it can take a thread.
  if constexpr (std::is_same_v<Request, v1::PullRequest>) {
    std::string puller = PullerOf(*caller, peer);
    if (!pulls_per_puller_.TryAcquire(puller)) {
      reactor->Finish(Busy(
          context,
          absl::StrFormat("%s already has %d pulls in flight on this shard "
                          "(--max-waiting-pulls-per-worker); retry later",
                          puller, pulls_per_puller_.cap())));
      return reactor;
    }
    reactor->set_on_done([this, peer, puller] {
      pulls_per_puller_.Release(puller);
      per_connection_.Release(peer);
    });
  }
  // The request buffer lives until Finish; the work reads it from a pool
  // thread.
  const bool queued = pool->Submit(
      [this, context, request, response, reactor, work, caller = *caller]() {
        MemoryLease serialized;
        const grpc::Status status = Handle<Request, Response>(
            context, *request, caller, work, response, &serialized);
        reactor->Keep(std::move(serialized));
        reactor->Finish(status);
      });
  if (!queued) {
    reactor->Finish(
        Busy(context, absl::StrFormat("the shard's queue of calls is full (%d "
                                      "calls wait; --max-queued-calls); retry "
                                      "later",
                                      pool->max_queued())));
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Init(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<v1::InitRequest, v1::InitResponse>(
      context, request, response, &handlers_,
      [this](grpc::CallbackServerContext* call, const v1::InitRequest& init,
             size_t, v1::InitResponse* answer) {
        const uint32_t worker = init.worker_id();
        const bool was_live = shard_->IsLive(worker);
        const absl::Status status = shard_->Init(init, answer);
        // A join or a rejoin is progress; a re-sent Init of a live worker
        // counts only as its first call.
        if (status.ok() && activity_ != nullptr) {
          if (!was_live && shard_->IsLive(worker)) {
            activity_->Heard(worker, absl::Now());
          } else {
            activity_->HeardFirst(worker, absl::Now());
          }
        }
        return Answer(call, status);
      });
}

grpc::ServerUnaryReactor* ParameterServerService::Push(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<ReceivedPush, v1::PushResponse>(
      context, request, response, &handlers_,
      [this](grpc::CallbackServerContext* call, const ReceivedPush& push,
             size_t request_bytes, v1::PushResponse* answer) {
        const absl::Status status = shard_->Push(push.view, answer);
        // A duplicate (a re-sent push) is not progress.
        if (status.ok() && activity_ != nullptr &&
            std::any_of(
                answer->acks().begin(), answer->acks().end(),
                [](const v1::ChunkAck& ack) { return !ack.duplicate(); })) {
          activity_->Heard(push.worker_id(), absl::Now());
        }
        shard_->metrics().CountPushBytes(
            request_bytes, status.ok() ? answer->ByteSizeLong() : 0);
        return Answer(call, status);
      });
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<v1::PullRequest, v1::PullResponse>(
      context, request, response, &pulls_,
      [this](grpc::CallbackServerContext* call, const v1::PullRequest& pull,
             size_t request_bytes, v1::PullResponse* answer) {
        absl::Duration waited;
        const grpc::Status status = WaitAndPull(call, pull, answer, &waited);
        ShardMetrics& metrics = shard_->metrics();
        metrics.ObservePullWait(waited);
        metrics.CountPullBytes(request_bytes,
                               status.ok() ? answer->ByteSizeLong() : 0);
        return status;
      });
}

grpc::ServerUnaryReactor* ParameterServerService::GetInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<v1::GetInfoRequest, v1::ShardInfo>(
      context, request, response, &handlers_,
      [this](grpc::CallbackServerContext*, const v1::GetInfoRequest&, size_t,
             v1::ShardInfo* answer) {
        *answer = shard_->Info();
        return grpc::Status::OK;
      });
}

grpc::Status ParameterServerService::WaitAndPull(
    grpc::CallbackServerContext* context, const v1::PullRequest& request,
    v1::PullResponse* response, absl::Duration* waited) {
  const absl::Time deadline = PullDeadline(context->deadline(), absl::Now());
  for (;;) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "the call was cancelled");
    }
    const absl::Time slice_end =
        std::min(deadline, absl::Now() + kPullWaitSlice);
    const absl::Status status =
        shard_->Pull(request, slice_end, response, waited);
    if (absl::IsDeadlineExceeded(status) && activity_ != nullptr &&
        shard_->PullWaitsOnOthers(request)) {
      activity_->Heard(request.worker_id(), absl::Now());
    }
    // Shard::Pull has no side effects and clears `response` on failure, so a
    // slice that ran out is simply tried again.
    if (!absl::IsDeadlineExceeded(status) || slice_end >= deadline) {
      return Answer(context, status);
    }
    if (shutting_down_.load(std::memory_order_acquire)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the shard is shutting down; pull again elsewhere "
                          "or after it restarts");
    }
  }
}

void ParameterServerService::BeginShutdown() {
  shutting_down_.store(true, std::memory_order_release);
}

void ParameterServerService::StopPools() {
  handlers_.Stop();
  pulls_.Stop();
}

}  // namespace gradwire
