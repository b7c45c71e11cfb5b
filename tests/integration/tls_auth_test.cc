// TLS, mutual TLS and bearer tokens between real gradwire-server processes
// and gRPC clients built the way workers build them (CreateSecureChannel):
// the right settings train, every wrong one is refused with its code, and a
// refused call leaves the shard as it was while it keeps serving others.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/tls/bearer_token.h"
#include "common/tls/grpc_transport.h"
#include "common/tls/transport_security.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"
#include "tests/integration/dev_certs.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;
using Stub = v1::ParameterServer::Stub;

// What a refused call must not change.
struct ShardState {
  bool initialized = false;
  uint64_t min_version = 0;
  uint64_t max_version = 0;
  std::map<uint64_t, std::vector<float>> weights;
};

class TlsAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    good_ = DevCerts::Make().value().release();
    other_ = DevCerts::Make().value().release();
    expired_ = DevCerts::Make({"--expired"}).value().release();
  }
  static void TearDownTestSuite() {
    delete good_;
    delete other_;
    delete expired_;
  }

  void StartShard(std::vector<std::string> args) {
    args.insert(args.begin(), {"--mode=asp", "--num-workers=1"});
    auto shard = ServerProcess::Start(args);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
  }

  // Client settings: verify the server with `ca`'s CA (null: plaintext),
  // present `cert`'s client certificate (null: none), send `token`'s token
  // (null: none).
  static TransportSecurity Client(const DevCerts* ca, const DevCerts* cert,
                                  const DevCerts* token,
                                  const std::string& server_name = "") {
    TransportSecurityFiles files;
    if (ca != nullptr) files.tls_ca = ca->ca();
    if (cert != nullptr) {
      files.tls_cert = cert->client_cert();
      files.tls_key = cert->client_key();
    }
    if (token != nullptr) files.auth_token_file = token->token_file();
    // A token without TLS here means it: these shards listen on loopback.
    files.allow_insecure_token = ca == nullptr;
    files.tls_server_name = server_name;
    return LoadTransportSecurity(files, TransportRole::kClient).value();
  }

  std::shared_ptr<grpc::Channel> Channel(const TransportSecurity& client) {
    return CreateSecureChannel(shard_->target(), client,
                               grpc::ChannelArguments());
  }
  std::unique_ptr<Stub> NewStub(const TransportSecurity& client) {
    return v1::ParameterServer::NewStub(Channel(client));
  }

  grpc::Status Init(Stub* stub) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    return stub->Init(
        &context, MakeInit(SgdConfig(1, v1::CONSISTENCY_MODE_ASP), chunks_, 0),
        &response);
  }
  grpc::Status Push(Stub* stub, uint64_t step) {
    v1::PushRequest request;
    request.set_worker_id(0);
    request.set_step(step);
    for (const TestChunk& chunk : chunks_) {
      v1::ChunkGradient* gradient = request.add_chunks();
      gradient->set_key(chunk.key);
      *gradient->mutable_gradient() =
          DenseData(RandomValues(chunk.initial.size(), 100 + step));
    }
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    return stub->Push(&context, request, &response);
  }
  grpc::Status GetInfo(Stub* stub, v1::ShardInfo* info) {
    grpc::ClientContext context;
    SetTimeout(&context);
    return stub->GetInfo(&context, v1::GetInfoRequest(), info);
  }
  grpc::Status Pull(Stub* stub) {
    absl::Status s = PullDense(stub, 0, chunks_, 0).status();
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                        std::string(s.message()));
  }

  ShardState ReadState(Stub* stub) {
    ShardState state;
    v1::ShardInfo info;
    const grpc::Status s = GetInfo(stub, &info);
    EXPECT_TRUE(s.ok()) << ToAbsl(s);
    state.initialized = info.initialized();
    state.min_version = info.min_version();
    state.max_version = info.max_version();
    if (state.initialized) {
      auto weights = PullDense(stub, 0, chunks_, 0);
      EXPECT_TRUE(weights.ok()) << weights.status();
      if (weights.ok()) state.weights = *std::move(weights);
    }
    return state;
  }

  // Init and one push through `stub`: every chunk at version 1.
  void Train(Stub* stub) {
    ASSERT_TRUE(Init(stub).ok());
    ASSERT_TRUE(Push(stub, 0).ok());
    const ShardState state = ReadState(stub);
    EXPECT_EQ(state.min_version, 1u);
    EXPECT_EQ(state.max_version, 1u);
  }

  // Every ParameterServer call through `bad` fails with `code`; through
  // `good` the shard is then exactly as before and still takes a push.
  void ExpectRefusedAndUnchanged(Stub* good, Stub* bad, grpc::StatusCode code) {
    const ShardState before = ReadState(good);
    v1::ShardInfo info;
    for (const grpc::Status& s : {Init(bad), Push(bad, before.max_version),
                                  GetInfo(bad, &info), Pull(bad)}) {
      EXPECT_EQ(s.error_code(), code) << ToAbsl(s);
    }
    const ShardState after = ReadState(good);
    EXPECT_EQ(after.initialized, before.initialized);
    EXPECT_EQ(after.min_version, before.min_version);
    EXPECT_EQ(after.max_version, before.max_version);
    EXPECT_EQ(after.weights, before.weights);
    if (before.initialized) {
      EXPECT_TRUE(Push(good, before.max_version).ok());
      EXPECT_EQ(ReadState(good).max_version, before.max_version + 1);
    }
  }

  static DevCerts* good_;
  static DevCerts* other_;
  static DevCerts* expired_;
  const std::vector<TestChunk> chunks_ = MakeChunks({300, 77}, 7);
  std::unique_ptr<ServerProcess> shard_;
};

DevCerts* TlsAuthTest::good_ = nullptr;
DevCerts* TlsAuthTest::other_ = nullptr;
DevCerts* TlsAuthTest::expired_ = nullptr;

TEST_F(TlsAuthTest, PlaintextIsTheDefaultAndSaysSo) {
  StartShard({});
  EXPECT_THAT(shard_->Stderr(),
              HasSubstr("transport: plaintext (no TLS; anyone who can reach "
                        "this port can train); auth token: off"));
  Train(NewStub(TransportSecurity()).get());
}

TEST_F(TlsAuthTest, TlsWithTheRightCaTrainsAndTheWrongCaIsRefused) {
  StartShard(good_->ServerFlags(false));
  EXPECT_THAT(shard_->Stderr(), HasSubstr("transport: TLS; auth token: off"));
  auto good = NewStub(Client(good_, nullptr, nullptr));
  Train(good.get());
  // The handshake fails: the shard is never reached.
  ExpectRefusedAndUnchanged(good.get(),
                            NewStub(Client(other_, nullptr, nullptr)).get(),
                            grpc::StatusCode::UNAVAILABLE);
  ExpectRefusedAndUnchanged(good.get(), NewStub(TransportSecurity()).get(),
                            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, ServerNameOverrideIsChecked) {
  StartShard(good_->ServerFlags(false));
  auto good = NewStub(Client(good_, nullptr, nullptr));
  Train(good.get());
  // shard-0 is among the certificate's names, not-a-shard is not.
  auto named = NewStub(Client(good_, nullptr, nullptr, "shard-0"));
  v1::ShardInfo info;
  EXPECT_TRUE(GetInfo(named.get(), &info).ok());
  ExpectRefusedAndUnchanged(
      good.get(), NewStub(Client(good_, nullptr, nullptr, "not-a-shard")).get(),
      grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, MutualTlsRefusesClientsWithoutATrustedCertificate) {
  StartShard(good_->ServerFlags(true));
  EXPECT_THAT(shard_->Stderr(),
              HasSubstr("transport: mutual TLS; auth token: off"));
  auto good = NewStub(Client(good_, good_, nullptr));
  Train(good.get());
  ExpectRefusedAndUnchanged(good.get(),
                            NewStub(Client(good_, nullptr, nullptr)).get(),
                            grpc::StatusCode::UNAVAILABLE);
  // Signed by another CA.
  ExpectRefusedAndUnchanged(good.get(),
                            NewStub(Client(good_, other_, nullptr)).get(),
                            grpc::StatusCode::UNAVAILABLE);
}

// openssl refuses `cert` under `ca` for its expiry. The script's --expired
// changes only the dates, so expiry is the certificate's one defect.
void ExpectExpired(const std::string& ca, const std::string& cert) {
  auto verify = RunToExit("/usr/bin/openssl", {"verify", "-CAfile", ca, cert});
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_NE(verify->exit_code, 0);
  EXPECT_THAT(verify->out + verify->err, HasSubstr("certificate has expired"));
}

TEST_F(TlsAuthTest, ClientRefusesAnExpiredServerCertificate) {
  ExpectExpired(expired_->ca(), expired_->server_cert());

  StartShard(expired_->ServerFlags(false));
  auto client = NewStub(Client(expired_, nullptr, nullptr));
  v1::ShardInfo info;
  EXPECT_EQ(GetInfo(client.get(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Init(client.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, MutualTlsRefusesAnExpiredClientCertificate) {
  // The shard trusts the CA, so expiry is all that is wrong.
  ExpectExpired(expired_->ca(), expired_->client_cert());

  StartShard({"--tls-cert=" + good_->server_cert(),
              "--tls-key=" + good_->server_key(), "--tls-ca=" + expired_->ca(),
              "--tls-require-client-cert"});
  auto expired = NewStub(Client(good_, expired_, nullptr));
  v1::ShardInfo info;
  EXPECT_EQ(GetInfo(expired.get(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Init(expired.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Push(expired.get(), 0).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// The shard's gradwire_shard_auth_refusals_total sample with `code`, or -1.
double AuthRefusals(int metrics_port, const std::string& code) {
  auto response = metrics_test::HttpRequest(metrics_port, "/metrics");
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok()) return -1;
  for (const auto& [key, value] : metrics_test::ParseSamples(response->body)) {
    if (absl::StartsWith(key, "gradwire_shard_auth_refusals_total{") &&
        absl::StrContains(key, absl::StrCat("code=\"", code, "\""))) {
      return value;
    }
  }
  return -1;
}

TEST_F(TlsAuthTest, TokenOnPlaintext) {
  const int metrics_port = PickFreeLoopbackPort();
  std::vector<std::string> flags = {
      "--auth-token-file=" + good_->token_file(), "--allow-insecure-token",
      "--metrics-address=127.0.0.1",
      absl::StrCat("--metrics-port=", metrics_port)};
  StartShard(flags);
  EXPECT_THAT(shard_->Stderr(),
              HasSubstr("transport: plaintext (no TLS; anyone who can reach "
                        "this port can train); auth token: on"));
  auto right = NewStub(Client(nullptr, nullptr, good_));
  // Before Init: a refused Init leaves the shard uninitialised.
  ExpectRefusedAndUnchanged(right.get(),
                            NewStub(Client(nullptr, nullptr, nullptr)).get(),
                            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(ReadState(right.get()).initialized);
  EXPECT_EQ(AuthRefusals(metrics_port, "unauthenticated"), 4);
  EXPECT_EQ(AuthRefusals(metrics_port, "permission_denied"), 0);
  Train(right.get());
  ExpectRefusedAndUnchanged(right.get(),
                            NewStub(Client(nullptr, nullptr, nullptr)).get(),
                            grpc::StatusCode::UNAUTHENTICATED);
  ExpectRefusedAndUnchanged(right.get(),
                            NewStub(Client(nullptr, nullptr, other_)).get(),
                            grpc::StatusCode::PERMISSION_DENIED);
  // Not a Bearer value.
  auto plain = NewStub(TransportSecurity());
  grpc::ClientContext context;
  SetTimeout(&context);
  context.AddMetadata(kAuthorizationMetadataKey,
                      "Basic " + std::string(64, 'A'));
  v1::ShardInfo info;
  EXPECT_EQ(plain->GetInfo(&context, v1::GetInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The token is checked before the request is parsed: bytes that are not
  // a message, without a token, are UNAUTHENTICATED, not INVALID_ARGUMENT.
  {
    grpc::GenericStub generic(Channel(TransportSecurity()));
    grpc::ClientContext call;
    SetTimeout(&call);
    grpc::Slice slice(std::string("\x00\x01", 2));
    grpc::ByteBuffer garbage(&slice, 1);
    grpc::ByteBuffer answer;
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(&call, "/gradwire.v1.ParameterServer/Push",
                      grpc::StubOptions(), &garbage, &answer,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << status.error_message();
  }
  // Every refusal is on the dashboards (4 calls each above, plus the Basic
  // one and the unparsable one); accepted calls are not.
  EXPECT_EQ(AuthRefusals(metrics_port, "unauthenticated"), 4 + 4 + 1 + 1);
  EXPECT_EQ(AuthRefusals(metrics_port, "permission_denied"), 4);
  // Health needs no token.
  EXPECT_EQ(CheckHealth(Channel(TransportSecurity()), "").value_or(-1), 1);
  EXPECT_EQ(
      CheckHealth(Channel(TransportSecurity()), "gradwire.v1.ParameterServer")
          .value_or(-1),
      1);
}

TEST_F(TlsAuthTest, TokenOnMutualTls) {
  std::vector<std::string> flags = good_->ServerFlags(true);
  flags.push_back("--auth-token-file=" + good_->token_file());
  StartShard(flags);
  EXPECT_THAT(shard_->Stderr(),
              HasSubstr("transport: mutual TLS; auth token: on"));
  auto right = NewStub(Client(good_, good_, good_));
  Train(right.get());
  ExpectRefusedAndUnchanged(right.get(),
                            NewStub(Client(good_, good_, nullptr)).get(),
                            grpc::StatusCode::UNAUTHENTICATED);
  ExpectRefusedAndUnchanged(right.get(),
                            NewStub(Client(good_, good_, other_)).get(),
                            grpc::StatusCode::PERMISSION_DENIED);
  // Health: no token needed, TLS still is.
  EXPECT_EQ(
      CheckHealth(Channel(Client(good_, good_, nullptr)), "").value_or(-1), 1);
  EXPECT_FALSE(CheckHealth(Channel(TransportSecurity()), "").ok());
}

}  // namespace
}  // namespace gradwire::testing
