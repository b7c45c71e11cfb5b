#include "server/process/parameter_server_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/tls/grpc_transport.h"

namespace gradwire {
namespace {

// Parses `bytes` as a `Request`; INVALID_ARGUMENT naming `method` when they
// are not one.
template <typename Request>
grpc::Status ParseRequest(const grpc::ByteBuffer& bytes, const char* method,
                          Request* request) {
  // A copy shares the received slices; parsing consumes it.
  grpc::ByteBuffer copy(bytes);
  const size_t size = copy.Length();
  if (grpc::SerializationTraits<Request>::Deserialize(&copy, request).ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrFormat("%s: the %d request bytes are not a valid %s", method,
                      size, Request::descriptor()->full_name()));
}

template <typename Response>
grpc::Status SerializeResponse(const Response& response,
                               grpc::ByteBuffer* out) {
  bool own_buffer = false;
  return grpc::SerializationTraits<Response>::Serialize(response, out,
                                                        &own_buffer);
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
      handlers_("handler", std::max(1, options.handler_threads)),
      pulls_("pull", std::max(1, options.pull_threads)) {}

ParameterServerService::~ParameterServerService() { StopPools(); }

grpc::Status ParameterServerService::CheckToken(
    const grpc::CallbackServerContext& context) const {
  if (auth_token_.empty()) return grpc::Status::OK;
  const absl::Status checked = CheckCallAuthorization(context, auth_token_);
  if (!checked.ok()) shard_->metrics().CountAuthRefusal(checked.code());
  return ToGrpcStatus(checked);
}

template <typename Request, typename Response, typename Work>
grpc::ServerUnaryReactor* ParameterServerService::Serve(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, CallPool* pool, Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status refused = CheckToken(*context); !refused.ok()) {
    reactor->Finish(refused);
    return reactor;
  }
  // The request buffer lives until Finish; the work reads it from a pool
  // thread.
  pool->Submit([context, request, response, reactor, work]() {
    Request parsed;
    Response answer;
    grpc::Status status =
        ParseRequest(*request, Request::descriptor()->name().c_str(), &parsed);
    if (status.ok()) status = work(context, parsed, request->Length(), &answer);
    if (status.ok()) status = SerializeResponse(answer, response);
    reactor->Finish(status);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Init(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<v1::InitRequest, v1::InitResponse>(
      context, request, response, &handlers_,
      [this](grpc::CallbackServerContext*, const v1::InitRequest& init, size_t,
             v1::InitResponse* answer) {
        if (activity_ != nullptr)
          activity_->Heard(init.worker_id(), absl::Now());
        return ToGrpcStatus(shard_->Init(init, answer));
      });
}

grpc::ServerUnaryReactor* ParameterServerService::Push(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve<v1::PushRequest, v1::PushResponse>(
      context, request, response, &handlers_,
      [this](grpc::CallbackServerContext*, const v1::PushRequest& push,
             size_t request_bytes, v1::PushResponse* answer) {
        if (activity_ != nullptr)
          activity_->Heard(push.worker_id(), absl::Now());
        const absl::Status status = shard_->Push(push, answer);
        shard_->metrics().CountPushBytes(
            request_bytes, status.ok() ? answer->ByteSizeLong() : 0);
        return ToGrpcStatus(status);
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
        grpc::Status status;
        {
          const ScopedPullWait alive_while_waiting(activity_, pull.worker_id());
          status = WaitAndPull(call, pull, answer, &waited);
        }
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
    // Shard::Pull has no side effects and clears `response` on failure, so a
    // slice that ran out is simply tried again.
    if (!absl::IsDeadlineExceeded(status) || slice_end >= deadline) {
      return ToGrpcStatus(status);
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
