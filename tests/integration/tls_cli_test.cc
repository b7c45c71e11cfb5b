// Transport security from the command line: `gradwire health` against TLS
// shards, --dry-run refusing bad --tls-* flags with exit 2 and a message
// naming the flag and file, and `gradwire local --tls-dir` running a whole
// job over mutual TLS with a token.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/dev_certs.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

std::string Binary(const char* variable) {
  const char* binary = std::getenv(variable);
  return binary != nullptr ? binary : "";
}

ExitedProcess RunBinary(const std::string& binary,
                        const std::vector<std::string>& args,
                        absl::Duration timeout = absl::Seconds(20)) {
  absl::StatusOr<ExitedProcess> exited = RunToExit(binary, args, timeout);
  EXPECT_TRUE(exited.ok()) << exited.status();
  return exited.ok() ? *exited : ExitedProcess{};
}

class TlsCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    good_ = DevCerts::Make().value().release();
    other_ = DevCerts::Make().value().release();
  }
  static void TearDownTestSuite() {
    delete good_;
    delete other_;
  }

  void SetUp() override {
    cli_ = Binary("GRADWIRE_CLI_BIN");
    worker_ = Binary("GRADWIRE_WORKER_BIN");
  }

  static DevCerts* good_;
  static DevCerts* other_;
  std::string cli_;
  std::string worker_;
};

DevCerts* TlsCliTest::good_ = nullptr;

// How every front end refuses a token without TLS.
constexpr char kInClear[] =
    " without TLS: the token would cross the network in clear";
DevCerts* TlsCliTest::other_ = nullptr;

TEST_F(TlsCliTest, HealthOverTls) {
  if (cli_.empty()) GTEST_SKIP() << "GRADWIRE_CLI_BIN is not set";
  std::vector<std::string> flags = good_->ServerFlags(false);
  flags.push_back("--auth-token-file=" + good_->token_file());
  auto shard = ServerProcess::Start(flags);
  ASSERT_TRUE(shard.ok()) << shard.status();
  const std::string addr = "--addr=" + (*shard)->target();

  ExitedProcess ok =
      RunBinary(cli_, {"health", addr, "--tls-ca=" + good_->ca()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.out, "SERVING\n");
  // A token is accepted and sent (the health service needs none).
  ok = RunBinary(cli_, {"health", addr, "--tls-ca=" + good_->ca(),
                        "--auth-token-file=" + other_->token_file()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  ExitedProcess plaintext = RunBinary(cli_, {"health", addr});
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.out << plaintext.err;
  EXPECT_THAT(plaintext.out, HasSubstr("UNAVAILABLE"));
  ExitedProcess wrong_ca =
      RunBinary(cli_, {"health", addr, "--tls-ca=" + other_->ca()});
  EXPECT_EQ(wrong_ca.exit_code, 1) << wrong_ca.out << wrong_ca.err;
}

TEST_F(TlsCliTest, HealthOverMutualTlsNeedsTheClientCertificate) {
  if (cli_.empty()) GTEST_SKIP() << "GRADWIRE_CLI_BIN is not set";
  auto shard = ServerProcess::Start(good_->ServerFlags(true));
  ASSERT_TRUE(shard.ok()) << shard.status();
  const std::string addr = "--addr=" + (*shard)->target();
  ExitedProcess ok = RunBinary(cli_, {"health", addr, "--tls-ca=" + good_->ca(),
                                      "--tls-cert=" + good_->client_cert(),
                                      "--tls-key=" + good_->client_key()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  ExitedProcess no_cert =
      RunBinary(cli_, {"health", addr, "--tls-ca=" + good_->ca()});
  EXPECT_EQ(no_cert.exit_code, 1) << no_cert.out << no_cert.err;

  // The flags come from the environment too (a probe inside a container).
  setenv("GRADWIRE_TLS_CA", good_->ca().c_str(), 1);
  setenv("GRADWIRE_TLS_CERT", good_->client_cert().c_str(), 1);
  setenv("GRADWIRE_TLS_KEY", good_->client_key().c_str(), 1);
  ExitedProcess from_env = RunBinary(cli_, {"health", addr});
  unsetenv("GRADWIRE_TLS_CA");
  unsetenv("GRADWIRE_TLS_CERT");
  unsetenv("GRADWIRE_TLS_KEY");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.out << from_env.err;
}

TEST_F(TlsCliTest, BadFlagsExitTwoNamingTheFlag) {
  if (cli_.empty() || worker_.empty()) {
    GTEST_SKIP() << "GRADWIRE_CLI_BIN or GRADWIRE_WORKER_BIN is not set";
  }
  const std::string server = ServerBinary().value();
  const std::string empty_token = good_->dir() + "/empty-token";
  std::ofstream(empty_token) << "\n";
  struct Case {
    std::string binary;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {worker_,
       {"--tls-ca=/no/such/ca.pem"},
       "--tls-ca=/no/such/ca.pem: cannot read it"},
      {worker_,
       {"--tls-ca=" + good_->ca(), "--tls-cert=" + good_->client_cert()},
       "--tls-cert=" + good_->client_cert() + ": needs --tls-key"},
      {worker_,
       {"--tls-key=" + good_->client_key()},
       "--tls-key=" + good_->client_key() + ": needs --tls-cert"},
      {worker_,
       {"--tls-cert=" + good_->client_cert(),
        "--tls-key=" + good_->client_key()},
       "--tls-cert=" + good_->client_cert() +
           ": a client certificate needs TLS: give --tls-ca"},
      {worker_,
       {"--tls-ca=" + good_->ca(), "--tls-cert=" + good_->client_cert(),
        "--tls-key=" + other_->client_key()},
       "--tls-key=" + other_->client_key() + ": is not the key"},
      {worker_,
       {"--tls-ca=" + good_->token_file()},
       "--tls-ca=" + good_->token_file() + ": holds no PEM certificate"},
      {worker_,
       {"--auth-token-file=" + empty_token},
       "--auth-token-file=" + empty_token + ": the token file is empty"},
      {server,
       {"--tls-require-client-cert"},
       "--tls-require-client-cert: needs --tls-ca"},
      {server,
       {"--tls-ca=" + good_->ca()},
       "--tls-ca=" + good_->ca() + ": verifies client certificates"},
      {server,
       {"--tls-cert=" + good_->server_cert(),
        "--tls-key=" + good_->client_key()},
       "--tls-key=" + good_->client_key() + ": is not the key"},
      {cli_,
       {"health", "--addr=127.0.0.1:1", "--tls-cert=" + good_->client_cert()},
       "--tls-cert=" + good_->client_cert() + ": needs --tls-key"},
      {cli_,
       {"local", "--tls-dir=/no/such/dir"},
       "/no/such/dir/server.pem: cannot read it"},
      {cli_,
       {"local", "--tls-ca=" + good_->ca()},
       "is set by gradwire local from --tls-dir"},
      // A token without TLS, on every front end.
      {worker_,
       {"--auth-token-file=" + good_->token_file()},
       "--auth-token-file=" + good_->token_file() + kInClear},
      {server,
       {"--auth-token-file=" + good_->token_file()},
       "--auth-token-file=" + good_->token_file() + kInClear},
      {server,
       {"--worker-tokens-file=" + good_->dir() + "/worker-tokens"},
       "--worker-tokens-file=" + good_->dir() + "/worker-tokens" + kInClear},
      {cli_,
       {"health", "--addr=127.0.0.1:1",
        "--auth-token-file=" + good_->token_file()},
       "--auth-token-file=" + good_->token_file() + kInClear},
      {cli_,
       {"local", "--auth-token-file=" + good_->token_file()},
       "--auth-token-file=" + good_->token_file() + kInClear},
      {cli_,
       {"run", "-n", "1", "--auth-token-file=" + good_->token_file(), "--",
        "true"},
       "--auth-token-file=" + good_->token_file() + kInClear},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    if (c.binary != cli_) args.push_back("--dry-run");
    ExitedProcess run = RunBinary(c.binary, args);
    EXPECT_EQ(run.exit_code, 2) << c.message << "\n" << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
  }
  // A variable names itself the same way, and good flags pass.
  setenv("GRADWIRE_AUTH_TOKEN_FILE", "/no/such/token", 1);
  ExitedProcess from_env = RunBinary(worker_, {"--dry-run"});
  unsetenv("GRADWIRE_AUTH_TOKEN_FILE");
  EXPECT_EQ(from_env.exit_code, 2);
  EXPECT_THAT(from_env.err, HasSubstr("--auth-token-file=/no/such/token"));
  ExitedProcess good = RunBinary(
      worker_, {"--dry-run", "--tls-ca=" + good_->ca(),
                "--tls-cert=" + good_->client_cert(),
                "--tls-key=" + good_->client_key(), "--tls-server-name=shard-0",
                "--auth-token-file=" + good_->token_file()});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_THAT(good.out, HasSubstr("--tls-ca=" + good_->ca()));
  EXPECT_THAT(good.out, HasSubstr("--tls-server-name=shard-0"));
  // --allow-insecure-token accepts a token without TLS.
  for (const std::string& binary : {worker_, server}) {
    ExitedProcess allowed =
        RunBinary(binary, {"--dry-run", "--allow-insecure-token",
                           "--auth-token-file=" + good_->token_file()});
    EXPECT_EQ(allowed.exit_code, 0) << binary << "\n" << allowed.err;
  }
}

TEST_F(TlsCliTest, LocalClusterOverMutualTlsWithToken) {
  if (cli_.empty() || worker_.empty()) {
    GTEST_SKIP() << "GRADWIRE_CLI_BIN or GRADWIRE_WORKER_BIN is not set";
  }
  TempDir run_dir;
  ExitedProcess run = RunBinary(
      cli_,
      {"local", "--shards=2", "--workers=2", "--tls-dir=" + good_->dir(),
       "--log-dir=" + run_dir.path(), "--model=mlp", "--max-steps=3",
       "--train-limit=256", "--test-limit=64", "--progress=log"},
      absl::Seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  // The directory holds a token per worker (dev-certs.sh's default 2):
  // each worker sends its own, and no worker can act as another.
  for (const char* log : {"shard-0.log", "shard-1.log"}) {
    EXPECT_THAT(ReadFileOrEmpty(run_dir.path() + "/" + log),
                HasSubstr("transport: mutual TLS; auth token: on; worker "
                          "tokens: 2 workers"))
        << log;
  }
  EXPECT_THAT(ReadFileOrEmpty(run_dir.path() + "/worker-0.log"),
              HasSubstr("worker 0: transport: mutual TLS; auth token: on"));
  // More workers than tokens: refused before anything starts, naming the
  // file and the command that writes enough.
  ExitedProcess short_of_tokens = RunBinary(
      cli_, {"local", "--shards=1", "--workers=3", "--tls-dir=" + good_->dir(),
             "--model=mlp", "--max-steps=1"});
  EXPECT_EQ(short_of_tokens.exit_code, 2) << short_of_tokens.err;
  EXPECT_THAT(short_of_tokens.err, HasSubstr("worker-token-2 is missing"));
  EXPECT_THAT(short_of_tokens.err,
              HasSubstr("scripts/dev-certs.sh --workers 3"));
}

}  // namespace
}  // namespace gradwire::testing
