// AliasedRequest: the same bytes as protobuf's own serialization, the bulk
// fields pointed to rather than copied, and a destructor that waits for
// gRPC's last reference. AliasedPushStub against a real gRPC server on
// loopback: the server receives exactly the request that was sent.
#include "client/aliased_request.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

// A push of `chunks` dense chunks of `values_bytes` bytes each (fp32), and
// a sparse one with `values_bytes` of values and small indices.
v1::PushRequest MakePush(int chunks, size_t values_bytes) {
  v1::PushRequest push;
  push.set_worker_id(3);
  push.set_step(77);
  for (int c = 0; c < chunks; ++c) {
    v1::ChunkGradient* chunk = push.add_chunks();
    chunk->set_key(100 + c);
    chunk->mutable_gradient()->set_numel(values_bytes / 4);
    v1::DenseValues* dense = chunk->mutable_gradient()->mutable_dense();
    dense->set_value_type(v1::VALUE_TYPE_FP32);
    std::string values(values_bytes, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = static_cast<char>((i * 131 + c) % 251);
    }
    dense->set_values(values);
  }
  v1::ChunkGradient* sparse = push.add_chunks();
  sparse->set_key(999);
  sparse->mutable_gradient()->set_numel(1 << 20);
  sparse->mutable_gradient()->mutable_sparse()->set_nnz(values_bytes / 2);
  sparse->mutable_gradient()->mutable_sparse()->set_indices(
      std::string(40, '\1'));
  sparse->mutable_gradient()->mutable_sparse()->set_value_type(
      v1::VALUE_TYPE_FP16);
  sparse->mutable_gradient()->mutable_sparse()->set_values(
      std::string(values_bytes, '\7'));
  return push;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

TEST(AliasedRequestTest, SameBytesAsProtobufWithTheBulkFieldsAliased) {
  for (const int chunks : {0, 1, 3}) {
    for (const size_t values_bytes :
         {size_t{0}, size_t{8}, size_t{4095}, size_t{4096}, size_t{100000}}) {
      const v1::PushRequest push = MakePush(chunks, values_bytes);
      const AliasedRequest aliased(push);
      EXPECT_EQ(Flatten(aliased.buffer()), push.SerializeAsString())
          << chunks << " chunks of " << values_bytes << " bytes";
      // Every values field at or above the threshold, and nothing else.
      const size_t expected = values_bytes >= AliasedRequest::kMinAliasedBytes
                                  ? (chunks + 1) * values_bytes
                                  : 0;
      EXPECT_EQ(aliased.aliased_bytes(), expected)
          << chunks << " chunks of " << values_bytes << " bytes";
    }
  }
  const v1::PushRequest empty;
  const AliasedRequest aliased(empty);
  EXPECT_EQ(Flatten(aliased.buffer()), "");
}

// The buffer points into the message: a change to the message's bytes
// (which callers must not make while the object lives) shows in it.
TEST(AliasedRequestTest, BulkBytesAreNotCopied) {
  v1::PushRequest push = MakePush(1, 8192);
  const AliasedRequest aliased(push);
  std::string* values = push.mutable_chunks(0)
                            ->mutable_gradient()
                            ->mutable_dense()
                            ->mutable_values();
  (*values)[5] = 'Z';
  EXPECT_EQ(Flatten(aliased.buffer()), push.SerializeAsString());
}

// The destructor returns only once every reference that gRPC took (here a
// copy of the buffer, as a call's send op holds one) has been released.
TEST(AliasedRequestTest, DestructorWaitsForTheLastReference) {
  const v1::PushRequest push = MakePush(2, 10000);
  auto aliased = std::make_unique<AliasedRequest>(push);
  auto held = std::make_unique<grpc::ByteBuffer>(aliased->buffer());
  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    aliased.reset();
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(destroyed.load());
  EXPECT_EQ(Flatten(*held), push.SerializeAsString());
  held.reset();
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
}

// A server that keeps what it received.
class RecordingServer final : public v1::ParameterServer::Service {
 public:
  grpc::Status Push(grpc::ServerContext* /*context*/,
                    const v1::PushRequest* request,
                    v1::PushResponse* response) override {
    received_ = request->SerializeAsString();
    response->add_acks()->set_key(request->chunks_size());
    return grpc::Status::OK;
  }
  const std::string& received() const { return received_; }

 private:
  std::string received_;
};

TEST(AliasedPushStubTest, TheServerReceivesTheRequestThatWasSent) {
  RecordingServer service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  const AliasedPushStub stub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                grpc::InsecureChannelCredentials(), args));
  for (const size_t values_bytes : {size_t{16}, size_t{4 << 20}}) {
    const v1::PushRequest push = MakePush(3, values_bytes);
    grpc::ClientContext context;
    v1::PushResponse response;
    const grpc::Status status = stub.Push(&context, push, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(service.received() == push.SerializeAsString())
        << values_bytes << " bytes per chunk";
    ASSERT_EQ(response.acks_size(), 1);
    EXPECT_EQ(response.acks(0).key(), 4u);
  }
  server->Shutdown();
}

}  // namespace
}  // namespace gradwire
