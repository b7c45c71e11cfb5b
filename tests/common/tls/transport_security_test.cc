// The --tls-* and --auth-token-file settings: which combinations each role
// accepts, what a bad file is told, and how the transport is described.
// Certificates come from scripts/dev-certs.sh, run into a temporary
// directory.
#include "common/tls/transport_security.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class TransportSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/gradwire-tls-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = new std::string(pattern);
    const std::string command =
        std::string(GRADWIRE_DEV_CERTS_SCRIPT) + " '" + *dir_ + "' >/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    const std::string command = "rm -rf '" + *dir_ + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
    delete dir_;
  }

  static std::string Path(const std::string& name) {
    return *dir_ + "/" + name;
  }
  static std::string Write(const std::string& name,
                           const std::string& content) {
    std::ofstream(Path(name), std::ios::binary) << content;
    return Path(name);
  }

  static TransportSecurityFiles Server() {
    TransportSecurityFiles f;
    f.tls_cert = Path("server.pem");
    f.tls_key = Path("server.key");
    return f;
  }
  static TransportSecurityFiles Client() {
    TransportSecurityFiles f;
    f.tls_ca = Path("ca.pem");
    return f;
  }

  // The message of a refusal; fails the test unless it is INVALID_ARGUMENT.
  static std::string Refusal(const TransportSecurityFiles& files,
                             TransportRole role) {
    const absl::Status s = ValidateTransportSecurity(files, role);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  }

  static std::string* dir_;
};

std::string* TransportSecurityTest::dir_ = nullptr;

TEST_F(TransportSecurityTest, NothingGivenIsPlaintext) {
  for (TransportRole role : {TransportRole::kServer, TransportRole::kClient}) {
    auto s = LoadTransportSecurity({}, role);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE(s->tls());
    EXPECT_FALSE(s->mutual_tls());
    EXPECT_EQ(DescribeAuthToken(*s), "off");
  }
  EXPECT_EQ(
      DescribeTransport(*LoadTransportSecurity({}, TransportRole::kServer)),
      "plaintext (no TLS; anyone who can reach this port can train)");
  EXPECT_EQ(DescribeTransport(TransportSecurity()), "plaintext (no TLS)");
}

TEST_F(TransportSecurityTest, ServerModes) {
  TransportSecurityFiles files = Server();
  auto tls = LoadTransportSecurity(files, TransportRole::kServer);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->tls());
  EXPECT_THAT(tls->cert_pem, StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_EQ(DescribeTransport(*tls), "TLS");

  files.tls_ca = Path("ca.pem");
  auto verify = LoadTransportSecurity(files, TransportRole::kServer);
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_FALSE(verify->mutual_tls());
  EXPECT_EQ(DescribeTransport(*verify),
            "TLS (client certificates verified when presented)");

  files.tls_require_client_cert = true;
  files.auth_token_file = Path("auth-token");
  auto mutual = LoadTransportSecurity(files, TransportRole::kServer);
  ASSERT_TRUE(mutual.ok()) << mutual.status();
  EXPECT_TRUE(mutual->mutual_tls());
  EXPECT_EQ(DescribeTransport(*mutual), "mutual TLS");
  EXPECT_EQ(DescribeAuthToken(*mutual), "on");
  EXPECT_EQ(mutual->auth_token.size(), 64u);
}

TEST_F(TransportSecurityTest, ClientModes) {
  TransportSecurityFiles files = Client();
  auto tls = LoadTransportSecurity(files, TransportRole::kClient);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(DescribeTransport(*tls), "TLS");
  files.tls_cert = Path("client.pem");
  files.tls_key = Path("client.key");
  files.tls_server_name = "shard-0";
  auto mutual = LoadTransportSecurity(files, TransportRole::kClient);
  ASSERT_TRUE(mutual.ok()) << mutual.status();
  EXPECT_EQ(DescribeTransport(*mutual), "mutual TLS");
  EXPECT_EQ(mutual->server_name, "shard-0");
  // A token alone: plaintext with a token, when allowed.
  TransportSecurityFiles token_only;
  token_only.auth_token_file = Path("auth-token");
  token_only.allow_insecure_token = true;
  auto token = LoadTransportSecurity(token_only, TransportRole::kClient);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_FALSE(token->tls());
  EXPECT_EQ(DescribeAuthToken(*token), "on");
}

TEST_F(TransportSecurityTest, TokenWithoutTlsIsRefused) {
  TransportSecurityFiles client;
  client.auth_token_file = Path("auth-token");
  EXPECT_EQ(Refusal(client, TransportRole::kClient),
            "--auth-token-file=" + Path("auth-token") +
                " without TLS: the token would cross the network in clear; "
                "give --tls-ca (TLS), or --allow-insecure-token to send it "
                "in clear anyway");
  TransportSecurityFiles server;
  server.auth_token_file = Path("auth-token");
  EXPECT_THAT(Refusal(server, TransportRole::kServer),
              AllOf(StartsWith("--auth-token-file=" + Path("auth-token") +
                               " without TLS: the token would cross the "
                               "network in clear"),
                    HasSubstr("--tls-cert and --tls-key"),
                    HasSubstr("--allow-insecure-token")));
  TransportSecurityFiles workers;
  workers.worker_tokens_file = Path("worker-tokens");
  EXPECT_THAT(Refusal(workers, TransportRole::kServer),
              StartsWith("--worker-tokens-file=" + Path("worker-tokens") +
                         " without TLS"));
  workers.auth_token_file = Path("auth-token");
  EXPECT_THAT(Refusal(workers, TransportRole::kServer),
              StartsWith("--auth-token-file=" + Path("auth-token") +
                         " and --worker-tokens-file="));
}

TEST_F(TransportSecurityTest, TokenWithoutTlsAllowedWithTheFlag) {
  for (TransportRole role : {TransportRole::kServer, TransportRole::kClient}) {
    TransportSecurityFiles files;
    files.auth_token_file = Path("auth-token");
    files.allow_insecure_token = true;
    if (role == TransportRole::kServer) {
      files.worker_tokens_file = Path("worker-tokens");
    }
    ::testing::internal::CaptureStderr();
    auto loaded = LoadTransportSecurity(files, role);
    const std::string warning = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_FALSE(loaded->tls());
    EXPECT_EQ(DescribeAuthToken(*loaded), "on");
    EXPECT_THAT(warning, HasSubstr("warning: --auth-token-file="));
    EXPECT_THAT(warning, HasSubstr("crosses the network in clear\n"));
    EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1);
    // Validation alone stays quiet.
    ::testing::internal::CaptureStderr();
    EXPECT_TRUE(ValidateTransportSecurity(files, role).ok());
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  }
}

TEST_F(TransportSecurityTest, TokenWithTlsNeedsNoFlagAndWarnsNot) {
  TransportSecurityFiles server = Server();
  server.auth_token_file = Path("auth-token");
  server.worker_tokens_file = Path("worker-tokens");
  TransportSecurityFiles client = Client();
  client.auth_token_file = Path("auth-token");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(LoadTransportSecurity(server, TransportRole::kServer).ok());
  EXPECT_TRUE(LoadTransportSecurity(client, TransportRole::kClient).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(TransportSecurityTest, HalfAPairIsRefused) {
  for (TransportRole role : {TransportRole::kServer, TransportRole::kClient}) {
    TransportSecurityFiles files =
        role == TransportRole::kServer ? Server() : Client();
    files.tls_cert = Path("client.pem");
    files.tls_key.clear();
    EXPECT_EQ(Refusal(files, role), "--tls-cert=" + Path("client.pem") +
                                        ": needs --tls-key (its private key)");
    files.tls_cert.clear();
    files.tls_key = Path("client.key");
    EXPECT_EQ(Refusal(files, role), "--tls-key=" + Path("client.key") +
                                        ": needs --tls-cert (its certificate)");
  }
}

TEST_F(TransportSecurityTest, ServerCombinations) {
  TransportSecurityFiles ca_only;
  ca_only.tls_ca = Path("ca.pem");
  EXPECT_THAT(Refusal(ca_only, TransportRole::kServer),
              StartsWith("--tls-ca=" + Path("ca.pem") +
                         ": verifies client "
                         "certificates, which needs TLS"));
  TransportSecurityFiles require = Server();
  require.tls_require_client_cert = true;
  EXPECT_THAT(Refusal(require, TransportRole::kServer),
              StartsWith("--tls-require-client-cert: needs --tls-ca"));
  TransportSecurityFiles named = Server();
  named.tls_server_name = "x";
  EXPECT_THAT(Refusal(named, TransportRole::kServer),
              HasSubstr("--tls-server-name=x: applies to clients only"));
}

TEST_F(TransportSecurityTest, ClientCombinations) {
  TransportSecurityFiles cert_without_ca;
  cert_without_ca.tls_cert = Path("client.pem");
  cert_without_ca.tls_key = Path("client.key");
  EXPECT_THAT(Refusal(cert_without_ca, TransportRole::kClient),
              StartsWith("--tls-cert=" + Path("client.pem") +
                         ": a client certificate needs TLS: give --tls-ca"));
  TransportSecurityFiles name_without_ca;
  name_without_ca.tls_server_name = "shard-0";
  EXPECT_THAT(Refusal(name_without_ca, TransportRole::kClient),
              StartsWith("--tls-server-name=shard-0: needs TLS"));
  TransportSecurityFiles require = Client();
  require.tls_require_client_cert = true;
  EXPECT_THAT(Refusal(require, TransportRole::kClient),
              HasSubstr("applies to servers only"));
}

TEST_F(TransportSecurityTest, UnreadableAndWrongFiles) {
  TransportSecurityFiles missing = Server();
  missing.tls_cert = Path("nope.pem");
  EXPECT_EQ(Refusal(missing, TransportRole::kServer),
            "--tls-cert=" + Path("nope.pem") +
                ": cannot read it (No such file or directory)");

  TransportSecurityFiles directory = Client();
  directory.tls_ca = *dir_;
  EXPECT_EQ(Refusal(directory, TransportRole::kClient),
            "--tls-ca=" + *dir_ + ": is not a regular file");

  TransportSecurityFiles empty = Client();
  empty.tls_ca = Write("empty.pem", "");
  EXPECT_EQ(Refusal(empty, TransportRole::kClient),
            "--tls-ca=" + Path("empty.pem") + ": the file is empty");

  TransportSecurityFiles token_as_ca = Client();
  token_as_ca.tls_ca = Path("auth-token");
  EXPECT_EQ(Refusal(token_as_ca, TransportRole::kClient),
            "--tls-ca=" + Path("auth-token") + ": holds no PEM certificate");

  TransportSecurityFiles key_as_cert = Server();
  key_as_cert.tls_cert = Path("server.key");
  EXPECT_EQ(Refusal(key_as_cert, TransportRole::kServer),
            "--tls-cert=" + Path("server.key") + ": holds no PEM certificate");

  TransportSecurityFiles cert_as_key = Server();
  cert_as_key.tls_key = Path("server.pem");
  EXPECT_EQ(Refusal(cert_as_key, TransportRole::kServer),
            "--tls-key=" + Path("server.pem") +
                ": holds no unencrypted PEM private key");

  TransportSecurityFiles mismatch = Server();
  mismatch.tls_key = Path("client.key");
  EXPECT_EQ(Refusal(mismatch, TransportRole::kServer),
            "--tls-key=" + Path("client.key") +
                ": is not the key of the certificate in --tls-cert=" +
                Path("server.pem"));

  TransportSecurityFiles empty_token = Client();
  empty_token.auth_token_file = Write("empty-token", "\n");
  EXPECT_THAT(Refusal(empty_token, TransportRole::kClient),
              StartsWith("--auth-token-file=" + Path("empty-token") +
                         ": the token file is empty"));
}

TEST_F(TransportSecurityTest, KeysAndTokenAreWrittenPrivate) {
  for (const char* name :
       {"ca.key", "server.key", "client.key", "auth-token"}) {
    struct stat info;
    ASSERT_EQ(stat(Path(name).c_str(), &info), 0) << name;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << name;
  }
}

}  // namespace
}  // namespace gradwire
