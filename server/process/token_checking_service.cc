#include "server/process/token_checking_service.h"

#include <utility>

#include "common/tls/grpc_transport.h"

namespace gradwire {

TokenCheckingService::TokenCheckingService(ParameterServerService* service,
                                           ShardMetrics* metrics,
                                           std::string token)
    : service_(service), metrics_(metrics), token_(std::move(token)) {}

grpc::Status TokenCheckingService::Check(
    const grpc::ServerContext& context) const {
  const absl::Status checked = CheckCallAuthorization(context, token_);
  if (!checked.ok()) metrics_->CountAuthRefusal(checked.code());
  return ToGrpcStatus(checked);
}

grpc::Status TokenCheckingService::Init(grpc::ServerContext* context,
                                        const v1::InitRequest* request,
                                        v1::InitResponse* response) {
  if (grpc::Status s = Check(*context); !s.ok()) return s;
  return service_->Init(context, request, response);
}

grpc::Status TokenCheckingService::Push(grpc::ServerContext* context,
                                        const v1::PushRequest* request,
                                        v1::PushResponse* response) {
  if (grpc::Status s = Check(*context); !s.ok()) return s;
  return service_->Push(context, request, response);
}

grpc::Status TokenCheckingService::Pull(grpc::ServerContext* context,
                                        const v1::PullRequest* request,
                                        v1::PullResponse* response) {
  if (grpc::Status s = Check(*context); !s.ok()) return s;
  return service_->Pull(context, request, response);
}

grpc::Status TokenCheckingService::GetInfo(grpc::ServerContext* context,
                                           const v1::GetInfoRequest* request,
                                           v1::ShardInfo* response) {
  if (grpc::Status s = Check(*context); !s.ok()) return s;
  return service_->GetInfo(context, request, response);
}

}  // namespace gradwire
