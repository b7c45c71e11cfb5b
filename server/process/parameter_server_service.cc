#include "server/process/parameter_server_service.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gradwire {

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

ParameterServerService::ParameterServerService(Shard* shard,
                                               WorkerActivity* activity)
    : shard_(shard), activity_(activity) {}

grpc::Status ParameterServerService::Init(grpc::ServerContext* context,
                                          const v1::InitRequest* request,
                                          v1::InitResponse* response) {
  if (activity_ != nullptr) activity_->Heard(request->worker_id(), absl::Now());
  return ToGrpcStatus(shard_->Init(*request, response));
}

grpc::Status ParameterServerService::Push(grpc::ServerContext* context,
                                          const v1::PushRequest* request,
                                          v1::PushResponse* response) {
  if (activity_ != nullptr) activity_->Heard(request->worker_id(), absl::Now());
  const absl::Status status = shard_->Push(*request, response);
  shard_->metrics().CountPushBytes(request->ByteSizeLong(),
                                   status.ok() ? response->ByteSizeLong() : 0);
  return ToGrpcStatus(status);
}

grpc::Status ParameterServerService::Pull(grpc::ServerContext* context,
                                          const v1::PullRequest* request,
                                          v1::PullResponse* response) {
  absl::Duration waited;
  grpc::Status status;
  {
    const ScopedPullWait alive_while_waiting(activity_, request->worker_id());
    status = WaitAndPull(context, *request, response, &waited);
  }
  ShardMetrics& metrics = shard_->metrics();
  metrics.ObservePullWait(waited);
  metrics.CountPullBytes(request->ByteSizeLong(),
                         status.ok() ? response->ByteSizeLong() : 0);
  return status;
}

grpc::Status ParameterServerService::WaitAndPull(grpc::ServerContext* context,
                                                 const v1::PullRequest& request,
                                                 v1::PullResponse* response,
                                                 absl::Duration* waited) {
  const absl::Time deadline = PullDeadline(context->deadline(), absl::Now());
  for (;;) {
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
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "the call was cancelled");
    }
  }
}

grpc::Status ParameterServerService::GetInfo(grpc::ServerContext* context,
                                             const v1::GetInfoRequest* request,
                                             v1::ShardInfo* response) {
  *response = shard_->Info();
  return grpc::Status::OK;
}

void ParameterServerService::BeginShutdown() {
  shutting_down_.store(true, std::memory_order_release);
}

}  // namespace gradwire
