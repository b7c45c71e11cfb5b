// Per-worker tokens against a live shard: a worker may Init, push and pull
// only as itself; the job's shared token only reads GetInfo; a refused call
// changes nothing and is counted.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tls/bearer_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::testing::HasSubstr;

class WorkerTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "worker_tokens.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ + "/workers") << "0 token-of-zero\n1 token-of-one\n";
    std::ofstream(dir_ + "/shared") << "job-token\n";
    auto server = ServerProcess::Start(
        {"--mode=bsp", "--num-workers=2",
         "--worker-tokens-file=" + dir_ + "/workers",
         "--auth-token-file=" + dir_ + "/shared", "--allow-insecure-token"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Calls Init for `worker` with `token`.
  grpc::Status Init(uint32_t worker, const std::string& token) {
    grpc::ClientContext context;
    SetTimeout(&context);
    context.AddMetadata(kAuthorizationMetadataKey,
                        BearerAuthorizationValue(token));
    v1::InitResponse response;
    return stub_->Init(
        &context,
        MakeInit(SgdConfig(2, v1::CONSISTENCY_MODE_BSP), chunks_, worker),
        &response);
  }

  bool Initialized(const std::string& token) {
    grpc::ClientContext context;
    SetTimeout(&context);
    context.AddMetadata(kAuthorizationMetadataKey,
                        BearerAuthorizationValue(token));
    v1::ShardInfo info;
    const grpc::Status status =
        stub_->GetInfo(&context, v1::GetInfoRequest(), &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info.initialized();
  }

  std::string dir_;
  std::vector<TestChunk> chunks_ = MakeChunks({100}, /*seed=*/3);
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(WorkerTokensTest, AWorkerActsOnlyAsItself) {
  EXPECT_THAT(server_->Stderr(), HasSubstr("worker tokens: 2 workers"));
  // Worker 1's token cannot Init as worker 0, nor can the job's token.
  grpc::Status status = Init(0, "token-of-one");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("the token of worker 1 cannot act as worker 0"));
  status = Init(0, "job-token");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("--worker-tokens-file"));
  // Nothing changed; the shared token reads GetInfo.
  EXPECT_FALSE(Initialized("job-token"));
  // Each worker as itself.
  status = Init(0, "token-of-zero");
  EXPECT_TRUE(status.ok()) << status.error_message();
  status = Init(1, "token-of-one");
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(Initialized("token-of-zero"));

  // A push as worker 1 with worker 0's token is refused and counts no step.
  v1::PushRequest push;
  push.set_worker_id(1);
  push.set_step(0);
  v1::ChunkGradient* chunk = push.add_chunks();
  chunk->set_key(chunks_[0].key);
  *chunk->mutable_gradient() = DenseData(RandomValues(100, 9));
  {
    grpc::ClientContext context;
    SetTimeout(&context);
    context.AddMetadata(kAuthorizationMetadataKey,
                        BearerAuthorizationValue("token-of-zero"));
    v1::PushResponse response;
    EXPECT_EQ(stub_->Push(&context, push, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    // Worker 1's own push of step 0 is new, not a duplicate.
    grpc::ClientContext context;
    SetTimeout(&context);
    context.AddMetadata(kAuthorizationMetadataKey,
                        BearerAuthorizationValue("token-of-one"));
    v1::PushResponse response;
    const grpc::Status pushed = stub_->Push(&context, push, &response);
    ASSERT_TRUE(pushed.ok()) << pushed.error_message();
    ASSERT_EQ(response.acks_size(), 1);
    EXPECT_FALSE(response.acks(0).duplicate());
  }
}

}  // namespace
}  // namespace gradwire::testing
