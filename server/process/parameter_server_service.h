// The gRPC face of one shard: gradwire.v1.ParameterServer on top of Shard
// (server/shard/shard.h). Named after the service it implements; it was
// service.h.
//
// The class is deliberately thin. It converts between the wire and Shard
// calls, maps absl::Status to grpc::Status (same code, same message), and
// turns a call's deadline into the deadline of Shard::Pull. Everything else
// (validation, consistency, exactly-once) is Shard's job and is tested there
// without gRPC.
//
// Pull waits for a step on a gRPC handler thread. It waits in slices of
// kPullWaitSlice so that it notices, within one slice, a cancelled call or a
// server that began to shut down; a Pull without a deadline waits at most
// kMaxPullWait.
//
// Liveness: with a WorkerActivity, every Init, Push and Pull is reported as
// hearing from its worker, and a waiting Pull for as long as it waits
// (worker_liveness.h).
//
// Metrics: the serialized sizes of Push and Pull requests and replies, and
// each Pull's wait, go to the shard's ShardMetrics.
//
// Thread safety: every method may be called concurrently (gRPC's sync server
// does so).
#ifndef GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_
#define GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_

#include <atomic>
#include <chrono>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"
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
// grpc::ServerContext::deadline() gives it; time_point::max() for none),
// capped at now + kMaxPullWait.
absl::Time PullDeadline(std::chrono::system_clock::time_point call_deadline,
                        absl::Time now);

class ParameterServerService final : public v1::ParameterServer::Service {
 public:
  // `shard` and `activity` are not owned and must outlive the service;
  // `activity` may be null (no liveness tracking).
  explicit ParameterServerService(Shard* shard,
                                  WorkerActivity* activity = nullptr);

  grpc::Status Init(grpc::ServerContext* context,
                    const v1::InitRequest* request,
                    v1::InitResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context,
                    const v1::PushRequest* request,
                    v1::PushResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context,
                    const v1::PullRequest* request,
                    v1::PullResponse* response) override;
  grpc::Status GetInfo(grpc::ServerContext* context,
                       const v1::GetInfoRequest* request,
                       v1::ShardInfo* response) override;

  // Ends waiting: from now on a Pull whose step has not arrived answers
  // UNAVAILABLE after at most kPullWaitSlice, because the pushes it waits
  // for cannot reach a server that is shutting down. Init, Push and Pulls
  // that need no wait still run. Idempotent.
  void BeginShutdown();

 private:
  // Pull's loop of waiting slices; adds the time spent waiting to *waited.
  grpc::Status WaitAndPull(grpc::ServerContext* context,
                           const v1::PullRequest& request,
                           v1::PullResponse* response, absl::Duration* waited);

  // Constant after construction.
  Shard* const shard_;
  WorkerActivity* const activity_;

  std::atomic<bool> shutting_down_{false};
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_PARAMETER_SERVER_SERVICE_H_
