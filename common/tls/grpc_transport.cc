#include "common/tls/grpc_transport.h"

#include <utility>
#include <vector>

#include "common/tls/bearer_token.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"

namespace gradwire {
namespace {

using grpc::experimental::ClientInterceptorFactoryInterface;
using grpc::experimental::ClientRpcInfo;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::Interceptor;
using grpc::experimental::InterceptorBatchMethods;

// Adds the authorization metadata before a call's initial metadata leaves.
class BearerTokenInterceptor final : public Interceptor {
 public:
  explicit BearerTokenInterceptor(std::shared_ptr<const std::string> value)
      : value_(std::move(value)) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthorizationMetadataKey,
                                                 *value_);
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<const std::string> value_;
};

class BearerTokenInterceptorFactory final
    : public ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(absl::string_view token)
      : value_(std::make_shared<const std::string>(
            BearerAuthorizationValue(token))) {}

  Interceptor* CreateClientInterceptor(ClientRpcInfo*) override {
    return new BearerTokenInterceptor(value_);
  }

 private:
  const std::shared_ptr<const std::string> value_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc_ssl_client_certificate_request_type request =
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  if (security.require_client_cert) {
    request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else if (!security.ca_pem.empty()) {
    request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  grpc::SslServerCredentialsOptions options(request);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.ca_pem;
  options.pem_private_key = security.key_pem;
  options.pem_cert_chain = security.cert_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateSecureChannel(
    const std::string& address, const TransportSecurity& security,
    grpc::ChannelArguments arguments) {
  if (security.tls() && !security.server_name.empty()) {
    arguments.SetSslTargetNameOverride(security.server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      ChannelCredentialsFor(security);
  if (security.auth_token.empty()) {
    return grpc::CreateCustomChannel(address, credentials, arguments);
  }
  std::vector<std::unique_ptr<ClientInterceptorFactoryInterface>> factories;
  factories.push_back(
      std::make_unique<BearerTokenInterceptorFactory>(security.auth_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, arguments, std::move(factories));
}

absl::Status CheckCallAuthorization(const grpc::ServerContextBase& context,
                                    absl::string_view expected_token) {
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range(kAuthorizationMetadataKey);
  if (first == last)
    return CheckBearerAuthorization(absl::nullopt, expected_token);
  if (std::next(first) != last) {
    return absl::UnauthenticatedError(
        "more than one 'authorization' metadata value");
  }
  const absl::string_view value(first->second.data(), first->second.size());
  return CheckBearerAuthorization(value, expected_token);
}

}  // namespace gradwire
