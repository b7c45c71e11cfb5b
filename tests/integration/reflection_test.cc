// gRPC reflection describes the API to grpcurl and grpc_cli. It is a
// service apart from gradwire.v1.ParameterServer, so the token check does
// not cover it: a shard that requires a token does not serve it.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/integration/dev_certs.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {
namespace {

constexpr char kReflection[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// Asks the server behind `channel` to list its services over reflection;
// the call's status and, when OK, the answer's bytes.
grpc::Status ListServices(std::shared_ptr<grpc::Channel> channel,
                          std::string* answer) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, kReflection, &queue);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  queue.Next(&tag, &ok);
  // ServerReflectionRequest{list_services: ""}: field 7, length 0.
  grpc::Slice slice(std::string("\x3a\x00", 2));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  queue.Next(&tag, &ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  queue.Next(&tag, &ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  queue.Next(&tag, &ok);
  if (ok) {
    std::vector<grpc::Slice> slices;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        answer->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  while (queue.Next(&tag, &ok) && tag != reinterpret_cast<void*>(5)) {
  }
  return status;
}

TEST(ReflectionTest, ServedWithoutATokenAndNotWithOne) {
  auto open = ServerProcess::Start({"--mode=bsp", "--num-workers=1"});
  ASSERT_TRUE(open.ok()) << open.status();
  std::string answer;
  grpc::Status status = ListServices((*open)->NewChannel(), &answer);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(answer.find("gradwire.v1.ParameterServer"), std::string::npos);

  auto certs = DevCerts::Make();
  ASSERT_TRUE(certs.ok()) << certs.status();
  auto guarded =
      ServerProcess::Start({"--mode=bsp", "--num-workers=1",
                            "--auth-token-file=" + (*certs)->token_file(),
                            "--allow-insecure-token"});
  ASSERT_TRUE(guarded.ok()) << guarded.status();
  answer.clear();
  status = ListServices((*guarded)->NewChannel(), &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << status.error_message();
  EXPECT_EQ(answer.find("gradwire.v1.ParameterServer"), std::string::npos);
}

}  // namespace
}  // namespace gradwire::testing
