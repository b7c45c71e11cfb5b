// Malformed requests against a live shard, from a table: each one is
// answered with its status code and a message, and afterwards the shard
// holds the same weights, counts no step for anyone, and still serves.
//
// The sparse index encoding (gaps of strictly increasing indices) cannot
// express unsorted or repeated indices; what a sender can get wrong there
// is an index past the chunk, a varint cut short, or stray bytes, and those
// are in the table.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

constexpr uint32_t kWorkers = 2;
constexpr uint64_t kNumel = 1000;

std::string Floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(float));
}

// A sparse fp32 chunk of kNumel elements with the given raw fields.
v1::ChunkData Sparse(uint64_t nnz, const std::string& indices,
                     const std::string& values) {
  v1::ChunkData data;
  data.set_numel(kNumel);
  v1::SparseValues* sparse = data.mutable_sparse();
  sparse->set_nnz(nnz);
  sparse->set_indices(indices);
  sparse->set_value_type(v1::VALUE_TYPE_FP32);
  sparse->set_values(values);
  return data;
}

v1::ChunkData DenseWith(float value_at_7) {
  std::vector<float> values = RandomValues(kNumel, 3);
  values[7] = value_at_7;
  return DenseData(values);
}

v1::PushRequest PushOf(uint32_t worker, uint64_t step, uint64_t key,
                       const v1::ChunkData& data) {
  v1::PushRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  v1::ChunkGradient* chunk = request.add_chunks();
  chunk->set_key(key);
  *chunk->mutable_gradient() = data;
  return request;
}

struct BadPush {
  std::string name;
  v1::PushRequest request;
  grpc::StatusCode code;
};

std::vector<BadPush> BadPushes() {
  const std::string one = Floats({1.0f});
  std::vector<BadPush> table = {
      {"index past the chunk",
       PushOf(0, 0, 0, Sparse(1, std::string("\xe8\x07", 2), one)),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"second index past the chunk (gap too large)",
       PushOf(0, 0, 0,
              Sparse(2, std::string("\x05\xe4\x07", 3), Floats({1, 2}))),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"varint cut short",
       PushOf(0, 0, 0, Sparse(1, std::string("\x85", 1), one)),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"stray bytes after the indices",
       PushOf(0, 0, 0, Sparse(1, std::string("\x05\x01", 2), one)),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"nnz larger than the index bytes",
       PushOf(0, 0, 0, Sparse(500, std::string("\x05", 1), one)),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"nnz larger than numel",
       PushOf(0, 0, 0, Sparse(kNumel + 1, std::string("\x05", 1), one)),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"values truncated",
       PushOf(0, 0, 0, Sparse(2, std::string("\x05\x01", 2), one.substr(0, 4))),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"NaN value", PushOf(0, 0, 0, DenseWith(std::nanf(""))),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"infinite value",
       PushOf(0, 0, 0, DenseWith(std::numeric_limits<float>::infinity())),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"numel of another chunk",
       PushOf(0, 0, 0, DenseData(RandomValues(999, 4))),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"no payload (unknown encoding)",
       PushOf(0, 0, 0,
              [] {
                v1::ChunkData data;
                data.set_numel(kNumel);
                return data;
              }()),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"chunk of another shard",
       PushOf(0, 0, 99, DenseData(RandomValues(kNumel, 5))),
       grpc::StatusCode::FAILED_PRECONDITION},
      {"worker id past the job",
       PushOf(kWorkers, 0, 0, DenseData(RandomValues(kNumel, 6))),
       grpc::StatusCode::OUT_OF_RANGE},
      {"step from the far future",
       PushOf(0, 1'000'000, 0, DenseData(RandomValues(kNumel, 7))),
       grpc::StatusCode::OUT_OF_RANGE},
  };
  // A whole request over the shard's message limit (--max-message-bytes).
  v1::PushRequest oversized = PushOf(0, 0, 0, DenseData({}));
  oversized.mutable_chunks(0)->mutable_gradient()->mutable_dense()->set_values(
      std::string(size_t{2} << 20, '\0'));
  table.push_back({"message over the limit", oversized,
                   grpc::StatusCode::RESOURCE_EXHAUSTED});
  return table;
}

class MalformedRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = ServerProcess::Start(
        {"--mode=bsp", "--num-workers=2", "--max-message-bytes=1048576"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->NewStub();
    const absl::Status s = InitBspWorkers(stub_.get(), chunks_, kWorkers);
    ASSERT_TRUE(s.ok()) << s;
  }

  // The shard as it was after Init: initial weights, serving, and step 0
  // still new for worker 0 (a valid push of it is not a duplicate).
  void ExpectUnchanged(const std::string& after) {
    auto weights = PullDense(stub_.get(), 1, chunks_, 0);
    ASSERT_TRUE(weights.ok()) << after << ": " << weights.status();
    EXPECT_EQ(weights->at(0), chunks_[0].initial) << after;
    const absl::StatusOr<int> health = CheckHealth(server_->NewChannel(), "");
    ASSERT_TRUE(health.ok()) << after << ": " << health.status();
    EXPECT_EQ(*health, 1) << after;  // SERVING
  }

  std::vector<TestChunk> chunks_ = MakeChunks({kNumel}, /*seed=*/11);
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(MalformedRequestsTest, EveryBadPushIsRefusedAndChangesNothing) {
  for (const BadPush& bad : BadPushes()) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub_->Push(&context, bad.request, &response);
    EXPECT_EQ(s.error_code(), bad.code) << bad.name << ": " << ToAbsl(s);
    EXPECT_FALSE(s.error_message().empty()) << bad.name;
    ASSERT_NO_FATAL_FAILURE(ExpectUnchanged(bad.name));
  }
  // None of them counted as worker 0's step 0.
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::PushResponse response;
  const grpc::Status s = stub_->Push(
      &context, PushOf(0, 0, 0, DenseData(RandomValues(kNumel, 8))), &response);
  ASSERT_TRUE(s.ok()) << ToAbsl(s);
  EXPECT_FALSE(response.acks(0).duplicate());
}

TEST_F(MalformedRequestsTest, ConflictingInitIsRefusedAndChangesNothing) {
  v1::TrainingConfig other = SgdConfig(kWorkers, v1::CONSISTENCY_MODE_BSP);
  other.mutable_optimizer()->set_learning_rate(0.5f);
  const std::vector<TestChunk> resized = MakeChunks({kNumel + 1}, 11);
  const std::vector<std::pair<std::string, v1::InitRequest>> table = {
      {"another learning rate", MakeInit(other, chunks_, 0)},
      {"another chunk size",
       MakeInit(SgdConfig(kWorkers, v1::CONSISTENCY_MODE_BSP), resized, 0)},
      {"another worker count",
       MakeInit(SgdConfig(kWorkers + 1, v1::CONSISTENCY_MODE_BSP), chunks_, 0)},
  };
  for (const auto& [name, request] : table) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    const grpc::Status s = stub_->Init(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << name << ": " << ToAbsl(s);
    EXPECT_FALSE(s.error_message().empty()) << name;
    ASSERT_NO_FATAL_FAILURE(ExpectUnchanged(name));
  }
}

}  // namespace
}  // namespace gradwire::testing
