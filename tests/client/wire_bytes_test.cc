// GrpcPsClient::wire_bytes() against a real gRPC server on loopback (in
// this process, a stand-in ParameterServer that acknowledges every push):
// the kernel's count of the bytes on the wire covers the payload plus a
// bounded framing overhead, on the client's side and, through the same
// socket mutator, on the server's, and the packets carry the segments'
// headers on top; it keeps growing when the server restarts and the
// client reconnects.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/grpc_ps_client.h"
#include "client/wire_counters.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

// Acknowledges every chunk of every push, changing nothing.
class AcknowledgingServer final : public v1::ParameterServer::Service {
  grpc::Status Push(grpc::ServerContext*, const v1::PushRequest* request,
                    v1::PushResponse* response) override {
    for (const v1::ChunkGradient& chunk : request->chunks()) {
      response->add_acks()->set_key(chunk.key());
    }
    return grpc::Status::OK;
  }
};

// Counts the server's accepted connections in `counters`.
class CountWireOption final : public grpc::ServerBuilderOption {
 public:
  explicit CountWireOption(std::shared_ptr<WireCounters> counters)
      : counters_(std::move(counters)) {}
  void UpdateArguments(grpc::ChannelArguments* arguments) override {
    AttachWireCounters(counters_, arguments);
  }
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  std::shared_ptr<WireCounters> counters_;
};

// Starts the stand-in on 127.0.0.1:`port` (0: one the OS picks, written
// back to *port), counting its connections in `counters`.
std::unique_ptr<grpc::Server> StartServer(
    AcknowledgingServer* service, int* port,
    std::shared_ptr<WireCounters> counters) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", *port),
                           grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  builder.SetOption(std::make_unique<CountWireOption>(std::move(counters)));
  return builder.BuildAndStart();
}

// One push to shard 0 of `values_bytes` payload bytes, incompressible.
std::vector<v1::PushRequest> PushOf(uint64_t step, size_t values_bytes) {
  v1::PushRequest push;
  push.set_worker_id(0);
  push.set_step(step);
  v1::ChunkGradient* chunk = push.add_chunks();
  chunk->set_key(7);
  chunk->mutable_gradient()->set_numel(values_bytes / 4);
  v1::DenseValues* dense = chunk->mutable_gradient()->mutable_dense();
  dense->set_value_type(v1::VALUE_TYPE_FP32);
  std::string values(values_bytes, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  dense->set_values(std::move(values));
  return {std::move(push)};
}

// Acknowledgements reach the kernel a moment after the response does:
// polls wire_bytes() until `done` or a second has passed.
template <typename Predicate>
WireTotals WireBytesUntil(const PsClient& client, Predicate done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  WireTotals totals = client.wire_bytes();
  while (!done(totals) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    totals = client.wire_bytes();
  }
  return totals;
}

class WireBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(&service_, &port_, server_wire_);
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.initial_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    auto client =
        GrpcPsClient::Connect({absl::StrCat("127.0.0.1:", port_)}, options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // Pushes `rounds` pushes of `bytes` payload bytes each.
  void PushRounds(int rounds, size_t bytes) {
    for (int i = 0; i < rounds; ++i) {
      std::vector<v1::PushResponse> responses;
      ASSERT_TRUE(client_->Push(PushOf(step_++, bytes), &responses).ok());
    }
  }

  AcknowledgingServer service_;
  int port_ = 0;
  std::shared_ptr<WireCounters> server_wire_ = std::make_shared<WireCounters>();
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcPsClient> client_;
  uint64_t step_ = 0;
};

// What HTTP/2 and gRPC add beyond the payload: the connection preface and
// settings, and each call's headers, frames and trailers.
constexpr uint64_t kConnectionBytes = 4096;
constexpr uint64_t kCallBytes = 1024;

TEST_F(WireBytesTest, CoversThePayloadWithBoundedFraming) {
  constexpr int kRounds = 20;
  constexpr size_t kBytes = 100000;
  PushRounds(kRounds, kBytes);
  const uint64_t payload = client_->traffic().push_bytes_sent;
  ASSERT_GE(payload, kRounds * kBytes);
  const WireTotals wire = WireBytesUntil(
      *client_, [&](const WireTotals& t) { return t.sent >= payload; });
  ASSERT_TRUE(wire.known);
  EXPECT_GE(wire.sent, payload);
  EXPECT_LT(wire.sent, 2 * payload + kConnectionBytes);
  EXPECT_GE(wire.received, client_->traffic().push_bytes_received);
  EXPECT_LT(wire.received, kConnectionBytes + kRounds * kCallBytes);
  // The server's side of the same connection: what the client sent.
  const WireTotals served = server_wire_->Snapshot();
  ASSERT_TRUE(served.known);
  EXPECT_GE(served.received, payload);
  EXPECT_LE(served.received, wire.sent + kConnectionBytes);
  // Packets carry the streams plus an IPv4 and a TCP header (40 bytes at
  // least) per segment: the calls took a segment each way at least.
  ASSERT_TRUE(wire.headers_known);
  ASSERT_TRUE(served.headers_known);
  EXPECT_GE(wire.packet_sent(), wire.sent + kRounds * 40);
  EXPECT_GE(wire.packet_received(), wire.received + kRounds * 40);
  EXPECT_GE(served.packet_received(), served.received + kRounds * 40);
  // Large pushes go out in segments of up to an MSS (64 KiB on loopback),
  // so headers stay a small share of them.
  EXPECT_LT(wire.sent_header_bytes, payload / 10);
}

TEST_F(WireBytesTest, SmallPushesCarryTheirFramingOnTop) {
  const WireTotals start = client_->wire_bytes();
  constexpr int kRounds = 50;
  PushRounds(kRounds, 64);
  const uint64_t payload = client_->traffic().push_bytes_sent;
  const WireTotals wire = WireBytesUntil(*client_, [&](const WireTotals& t) {
    return t.sent >= start.sent + payload;
  });
  const WireTotals pushes = WireDifference(wire, start);
  ASSERT_TRUE(pushes.known);
  // Each call costs at least a HEADERS and a DATA frame header (9 bytes
  // each) and gRPC's message prefix (5) beyond its payload.
  EXPECT_GE(pushes.sent, payload + kRounds * 23);
  EXPECT_LT(pushes.sent, payload + kRounds * kCallBytes);
  // And each call's segments their IP and TCP headers.
  ASSERT_TRUE(pushes.headers_known);
  EXPECT_GE(pushes.packet_sent(), pushes.sent + kRounds * 40);
}

TEST_F(WireBytesTest, KeepsGrowingAcrossAServerRestart) {
  constexpr size_t kBytes = 50000;
  PushRounds(5, kBytes);
  const uint64_t first_payload = client_->traffic().push_bytes_sent;
  const WireTotals before = WireBytesUntil(
      *client_, [&](const WireTotals& t) { return t.sent >= first_payload; });
  ASSERT_TRUE(before.known);
  ASSERT_GE(before.sent, first_payload);

  // The connection closes; a new server takes the same port and the
  // client's retries reconnect to it (a new socket, maybe the same fd).
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  server_.reset();
  WireTotals after_close = client_->wire_bytes();
  EXPECT_TRUE(after_close.known);
  EXPECT_GE(after_close.sent, before.sent);
  server_ = StartServer(&service_, &port_, server_wire_);
  ASSERT_NE(server_, nullptr);
  PushRounds(5, kBytes);
  const uint64_t second_payload =
      client_->traffic().push_bytes_sent - first_payload;
  ASSERT_GE(second_payload, 5 * kBytes);
  const WireTotals after = WireBytesUntil(*client_, [&](const WireTotals& t) {
    return t.sent >= before.sent + second_payload;
  });
  ASSERT_TRUE(after.known);
  EXPECT_GE(after.sent, before.sent + second_payload);
  EXPECT_GE(after.received, before.received);
  EXPECT_LT(after.sent,
            2 * (first_payload + second_payload) + 2 * kConnectionBytes);
}

}  // namespace
}  // namespace gradwire
