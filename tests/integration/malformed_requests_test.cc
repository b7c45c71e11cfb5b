// Malformed requests against a live shard, from a table: each one is
// answered with its status code and a message, and afterwards the shard
// holds the same weights, counts no step for anyone, and still serves.
//
// The sparse index encoding (gaps of strictly increasing indices) can
// express an unsorted or repeated index only through a gap that wraps
// around 2^64; that, an index past the chunk, a varint cut short and stray
// bytes are in the table. A step from the far past is not malformed: the
// shard has accounted for it, so it is acknowledged as a duplicate and
// changes nothing (its own test below).
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/consistency/worker_progress.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
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
      {"index repeated (a gap that wraps around 2^64)",
       PushOf(
           0, 0, 0,
           Sparse(2, "\x05" + std::string(9, '\xff') + "\x01", Floats({1, 2}))),
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
      {"dense values truncated",
       PushOf(0, 0, 0,
              [] {
                v1::ChunkData data = DenseData(RandomValues(kNumel, 9));
                data.mutable_dense()->mutable_values()->resize(kNumel * 4 - 2);
                return data;
              }()),
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
      {"unknown value type",
       PushOf(0, 0, 0,
              [] {
                v1::ChunkData data = DenseData(RandomValues(kNumel, 10));
                data.mutable_dense()->set_value_type(
                    static_cast<v1::ValueType>(9));
                return data;
              }()),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"the same chunk twice in one push",
       [] {
         v1::PushRequest twice =
             PushOf(0, 0, 0, DenseData(RandomValues(kNumel, 12)));
         *twice.add_chunks() = twice.chunks(0);
         return twice;
       }(),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"no chunks",
       [] {
         v1::PushRequest empty;
         empty.set_step(0);
         return empty;
       }(),
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

// What a client can see of the shard's state: the chunk's weights and
// the shard's versions and clock.
struct VisibleState {
  std::vector<float> weights;
  uint64_t min_version = 0;
  uint64_t max_version = 0;
  uint64_t min_clock = 0;
};

absl::StatusOr<VisibleState> ReadVisibleState(
    v1::ParameterServer::Stub* stub, const std::vector<TestChunk>& chunks,
    uint64_t clock) {
  auto weights = PullDense(stub, 0, chunks, clock);
  if (!weights.ok()) return weights.status();
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::ShardInfo info;
  if (grpc::Status s = stub->GetInfo(&context, v1::GetInfoRequest(), &info);
      !s.ok()) {
    return ToAbsl(s);
  }
  return VisibleState{weights->at(0), info.min_version(), info.max_version(),
                      info.min_clock()};
}

// A step from the far past (worker_progress.h): every step below a worker's
// next step is accounted for, so the shard acknowledges it as a duplicate
// with the chunk's current version and clock, and applies nothing. That
// holds however far back the step is (past the 64-step window of early
// steps) and whichever worker sends it; a malformed one is still refused,
// because every chunk is validated before any step is judged.
// Bytes that are not a message at all: the service parses them itself, so
// they are INVALID_ARGUMENT naming the message type, not gRPC's INTERNAL
// with an empty message.
TEST_F(MalformedRequestsTest, BytesThatAreNotAMessageAreInvalidArgument) {
  struct Garbage {
    std::string name;
    std::string bytes;
  };
  const std::string push_bytes =
      PushOf(0, 0, 0, DenseData(RandomValues(kNumel, 13))).SerializeAsString();
  const Garbage garbage[] = {
      {"a length-delimited field cut short", push_bytes.substr(0, 40)},
      {"an 11-byte varint", "\x08" + std::string(10, '\xff') + "\x01"},
      {"a field number 0", std::string("\x00\x01", 2)},
      {"an end-group tag with no group", std::string("\x0c", 1)},
  };
  grpc::GenericStub generic(server_->NewChannel());
  for (const char* method : {"Init", "Push", "Pull", "GetInfo"}) {
    for (const Garbage& g : garbage) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
      grpc::Slice slice(g.bytes);
      grpc::ByteBuffer request(&slice, 1);
      grpc::ByteBuffer response;
      absl::Notification done;
      grpc::Status status;
      generic.UnaryCall(
          &context, absl::StrCat("/gradwire.v1.ParameterServer/", method),
          grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
            status = std::move(s);
            done.Notify();
          });
      done.WaitForNotification();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ", " << g.name << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), ::testing::HasSubstr("not a valid"))
          << method << ", " << g.name;
    }
  }
  ExpectUnchanged("bytes that are not a message");
}

TEST_F(MalformedRequestsTest, StepFromTheFarPastIsADuplicateAndChangesNothing) {
  // Both workers complete steps [0, kSteps): the clock is kSteps.
  constexpr uint64_t kSteps = kStepWindow + 6;
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (uint32_t worker = 0; worker < kWorkers; ++worker) {
      grpc::ClientContext context;
      SetTimeout(&context);
      v1::PushResponse response;
      const v1::PushRequest push = PushOf(
          worker, step, 0, DenseData(RandomValues(kNumel, 100 + step, 0.01f)));
      const grpc::Status s = stub_->Push(&context, push, &response);
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << ToAbsl(s);
    }
  }
  const absl::StatusOr<VisibleState> before =
      ReadVisibleState(stub_.get(), chunks_, kSteps);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->min_clock, kSteps);
  ASSERT_EQ(before->max_version, kSteps);

  const std::vector<std::pair<std::string, v1::PushRequest>> past = {
      {"step 0 by worker 0, 70 steps behind it",
       PushOf(0, 0, 0, DenseData(RandomValues(kNumel, 20)))},
      {"step 3 by worker 1, far below the clock",
       PushOf(1, 3, 0, DenseData(RandomValues(kNumel, 21)))},
      {"the last completed step again",
       PushOf(0, kSteps - 1, 0, DenseData(RandomValues(kNumel, 22)))},
  };
  for (const auto& [name, request] : past) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub_->Push(&context, request, &response);
    ASSERT_TRUE(s.ok()) << name << ": " << ToAbsl(s);
    ASSERT_EQ(response.acks_size(), 1) << name;
    EXPECT_TRUE(response.acks(0).duplicate()) << name;
    EXPECT_EQ(response.acks(0).version(), kSteps) << name;
    EXPECT_EQ(response.acks(0).clock(), kSteps) << name;
  }
  {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::PushResponse response;
    const grpc::Status s = stub_->Push(
        &context, PushOf(0, 0, 0, DenseWith(std::nanf(""))), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << "a malformed push of a past step: " << ToAbsl(s);
  }

  const absl::StatusOr<VisibleState> after =
      ReadVisibleState(stub_.get(), chunks_, kSteps);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->weights, before->weights);
  EXPECT_EQ(after->min_version, before->min_version);
  EXPECT_EQ(after->max_version, before->max_version);
  EXPECT_EQ(after->min_clock, before->min_clock);

  // The current step is still new for worker 0.
  grpc::ClientContext context;
  SetTimeout(&context);
  v1::PushResponse response;
  const grpc::Status s = stub_->Push(
      &context, PushOf(0, kSteps, 0, DenseData(RandomValues(kNumel, 23))),
      &response);
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
