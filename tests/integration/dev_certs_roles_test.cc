// scripts/dev-certs.sh gives each certificate one role: the shard's serves
// (serverAuth), the workers' and the health probe's are presented by clients
// (clientAuth). openssl checks the extensions, and a gradwire-server that
// requires client certificates refuses the shard's own certificate as one;
// a client refuses a shard serving the workers' certificate.
#include <memory>
#include <string>
#include <vector>

#include "common/tls/grpc_transport.h"
#include "common/tls/transport_security.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/dev_certs.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

class DevCertsRolesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = DevCerts::Make().value().release(); }
  static void TearDownTestSuite() { delete certs_; }

  static std::string Path(const std::string& name) {
    return certs_->dir() + "/" + name;
  }

  // `openssl verify -purpose <purpose>` of `cert` under the CA: its exit
  // code and what it printed.
  static std::pair<int, std::string> Verify(const std::string& purpose,
                                            const std::string& cert) {
    auto run = RunToExit("/usr/bin/openssl", {"verify", "-CAfile", certs_->ca(),
                                              "-purpose", purpose, Path(cert)});
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return {-1, ""};
    return {run->exit_code, run->out + run->err};
  }

  // GetInfo on `shard` over mutual TLS, presenting `cert` and `key` (names
  // in the certificate directory).
  static grpc::Status GetInfo(const ServerProcess& shard,
                              const std::string& cert, const std::string& key) {
    TransportSecurityFiles files;
    files.tls_ca = certs_->ca();
    files.tls_cert = Path(cert);
    files.tls_key = Path(key);
    auto client = LoadTransportSecurity(files, TransportRole::kClient);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "");
    auto stub = v1::ParameterServer::NewStub(
        CreateSecureChannel(shard.target(), *client, grpc::ChannelArguments()));
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(5));
    v1::ShardInfo info;
    return stub->GetInfo(&context, v1::GetInfoRequest(), &info);
  }

  static std::unique_ptr<ServerProcess> StartShard(
      const std::vector<std::string>& tls_flags) {
    std::vector<std::string> args = {"--mode=asp", "--num-workers=1"};
    args.insert(args.end(), tls_flags.begin(), tls_flags.end());
    auto shard = ServerProcess::Start(args);
    EXPECT_TRUE(shard.ok()) << shard.status();
    return shard.ok() ? *std::move(shard) : nullptr;
  }

  static DevCerts* certs_;
};

DevCerts* DevCertsRolesTest::certs_ = nullptr;

TEST_F(DevCertsRolesTest, TheShardCertificateServesOnly) {
  EXPECT_EQ(Verify("sslserver", "server.pem").first, 0);
  const auto as_client = Verify("sslclient", "server.pem");
  EXPECT_NE(as_client.first, 0);
  EXPECT_THAT(as_client.second, HasSubstr("certificate purpose"));
}

TEST_F(DevCertsRolesTest, ClientCertificatesAuthenticateClientsOnly) {
  for (const char* cert : {"client.pem", "probe.pem"}) {
    EXPECT_EQ(Verify("sslclient", cert).first, 0) << cert;
    const auto as_server = Verify("sslserver", cert);
    EXPECT_NE(as_server.first, 0) << cert;
    EXPECT_THAT(as_server.second, HasSubstr("certificate purpose")) << cert;
  }
}

TEST_F(DevCertsRolesTest, AShardRefusesTheShardCertificateFromAClient) {
  std::unique_ptr<ServerProcess> shard = StartShard(certs_->ServerFlags(true));
  ASSERT_NE(shard, nullptr);
  EXPECT_TRUE(GetInfo(*shard, "client.pem", "client.key").ok());
  // What a health probe in the shard's container presents.
  EXPECT_TRUE(GetInfo(*shard, "probe.pem", "probe.key").ok());
  const grpc::Status as_client = GetInfo(*shard, "server.pem", "server.key");
  EXPECT_EQ(as_client.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ToAbsl(as_client);
}

TEST_F(DevCertsRolesTest, AClientRefusesAShardServingAWorkerCertificate) {
  std::unique_ptr<ServerProcess> shard = StartShard(
      {"--tls-cert=" + Path("client.pem"), "--tls-key=" + Path("client.key"),
       "--tls-ca=" + certs_->ca(), "--tls-require-client-cert"});
  ASSERT_NE(shard, nullptr);
  const grpc::Status status = GetInfo(*shard, "client.pem", "client.key");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ToAbsl(status);
}

}  // namespace
}  // namespace gradwire::testing
