// gradwire.v1.ParameterServer behind a bearer token: every method first
// checks the call's "authorization: Bearer <token>" metadata
// (common/tls/bearer_token.h) and only then hands the call to the wrapped
// ParameterServerService. A refused call never reaches the shard, so it
// changes nothing there.
//
// Codes of a refusal (the tests pin them):
//   UNAUTHENTICATED    no authorization metadata, or not a Bearer token;
//   PERMISSION_DENIED  a Bearer token other than the shard's.
// Neither is retried by the client (it retries UNAVAILABLE only), so a
// misconfigured worker fails at once with the reason.
//
// Why a wrapping service rather than grpc::AuthMetadataProcessor or a server
// interceptor: the processor runs only with secure server credentials, and
// the token must guard plaintext shards as well; an interceptor in gRPC 1.51
// cannot finish a call with a status of its choice before the handler runs.
// Only this service is wrapped: grpc.health.v1.Health stays reachable
// without a token (probes), over TLS when TLS is on.
//
// Each refusal is counted in gradwire_shard_auth_refusals_total
// (shard_metrics.h), so a misconfigured or hostile client shows on the
// dashboards and not only in its own log.
//
// Thread safety: every method may be called concurrently; the token is
// constant.
#ifndef GRADWIRE_SERVER_PROCESS_TOKEN_CHECKING_SERVICE_H_
#define GRADWIRE_SERVER_PROCESS_TOKEN_CHECKING_SERVICE_H_

#include <string>

#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/process/parameter_server_service.h"
#include "server/shard/shard_metrics.h"

namespace gradwire {

class TokenCheckingService final : public v1::ParameterServer::Service {
 public:
  // `service` and `metrics` are not owned and must outlive this one;
  // `token` is not empty.
  TokenCheckingService(ParameterServerService* service, ShardMetrics* metrics,
                       std::string token);

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

 private:
  // OK, or the refusal as a grpc::Status.
  grpc::Status Check(const grpc::ServerContext& context) const;

  ParameterServerService* const service_;
  ShardMetrics* const metrics_;
  const std::string token_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_TOKEN_CHECKING_SERVICE_H_
