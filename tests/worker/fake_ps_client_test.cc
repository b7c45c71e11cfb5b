// FakePsClient over two in-memory shards: Init, Push and Pull reach the
// right shard, BSP works across two clients that share the shards, traffic
// is counted in serialized bytes, and the shards' errors keep their codes.
#include "tests/worker/fake_ps_client.h"

#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr float kLearningRate = 0.5f;

// Chunk keys 0 and 2 live on shard 0, key 1 on shard 1.
const std::map<uint64_t, uint64_t> kNumels = {{0, 8}, {1, 6}, {2, 5}};
uint32_t ShardOf(uint64_t key) { return key == 1 ? 1 : 0; }

// Exact dyadic values, so sums and SGD steps are exact in float.
std::vector<float> Initial(uint64_t key) {
  std::vector<float> values(kNumels.at(key));
  for (size_t i = 0; i < values.size(); ++i) values[i] = key * 0.5f - i * 0.25f;
  return values;
}

std::vector<float> Gradient(uint32_t worker, uint64_t step, uint64_t key) {
  std::vector<float> values(kNumels.at(key));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>((worker * 7 + step * 3 + key + i) % 8) / 8;
  }
  return values;
}

v1::ChunkData Dense(const std::vector<float>& values) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kDense;
  chunk.numel = values.size();
  chunk.values = values;
  v1::ChunkData data;
  EXPECT_TRUE(EncodeChunk(chunk, &data).ok());
  return data;
}

std::vector<float> Decoded(const v1::ChunkData& data, uint64_t numel) {
  DecodeOptions options;
  options.expected_numel = numel;
  CompressedChunk chunk;
  EXPECT_TRUE(DecodeChunk(data, options, &chunk).ok());
  std::vector<float> dense(numel);
  DecompressInto(chunk, absl::MakeSpan(dense));
  return dense;
}

v1::TrainingConfig Config(uint32_t num_workers) {
  v1::TrainingConfig config;
  config.set_num_workers(num_workers);
  config.set_mode(v1::CONSISTENCY_MODE_BSP);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  config.set_num_shards(2);
  config.set_partition_bytes(uint64_t{4} << 20);
  return config;
}

std::vector<v1::InitRequest> InitRequests(uint32_t worker,
                                          uint32_t num_workers) {
  std::vector<v1::InitRequest> requests(2);
  for (uint32_t shard = 0; shard < 2; ++shard) {
    requests[shard].set_worker_id(worker);
    requests[shard].set_shard_id(shard);
    *requests[shard].mutable_config() = Config(num_workers);
  }
  for (const auto& [key, numel] : kNumels) {
    v1::ChunkDeclaration* chunk = requests[ShardOf(key)].add_chunks();
    chunk->set_key(key);
    *chunk->mutable_initial() = Dense(Initial(key));
  }
  return requests;
}

std::vector<v1::PushRequest> PushRequests(uint32_t worker, uint64_t step) {
  std::vector<v1::PushRequest> requests(2);
  for (v1::PushRequest& request : requests) {
    request.set_worker_id(worker);
    request.set_step(step);
  }
  for (const auto& [key, numel] : kNumels) {
    v1::ChunkGradient* chunk = requests[ShardOf(key)].add_chunks();
    chunk->set_key(key);
    *chunk->mutable_gradient() = Dense(Gradient(worker, step, key));
  }
  return requests;
}

std::vector<v1::PullRequest> PullRequests(uint32_t worker, uint64_t min_step) {
  std::vector<v1::PullRequest> requests(2);
  for (v1::PullRequest& request : requests) request.set_worker_id(worker);
  for (const auto& [key, numel] : kNumels) {
    v1::ChunkPull* chunk = requests[ShardOf(key)].add_chunks();
    chunk->set_key(key);
    chunk->set_min_step(min_step);
  }
  return requests;
}

// The pulled weights by key.
std::map<uint64_t, std::vector<float>> Weights(
    const std::vector<v1::PullResponse>& responses) {
  std::map<uint64_t, std::vector<float>> weights;
  for (const v1::PullResponse& response : responses) {
    for (const v1::ChunkWeights& chunk : response.chunks()) {
      EXPECT_FALSE(chunk.is_delta());
      weights[chunk.key()] = Decoded(chunk.data(), kNumels.at(chunk.key()));
    }
  }
  return weights;
}

// Dense BSP SGD over `steps` steps of `num_workers` workers.
std::map<uint64_t, std::vector<float>> Reference(uint32_t num_workers,
                                                 uint64_t steps) {
  std::map<uint64_t, std::vector<float>> weights;
  for (const auto& [key, numel] : kNumels) {
    weights[key] = Initial(key);
    for (uint64_t step = 0; step < steps; ++step) {
      std::vector<float> mean(numel, 0.0f);
      for (uint32_t worker = 0; worker < num_workers; ++worker) {
        const std::vector<float> g = Gradient(worker, step, key);
        for (size_t i = 0; i < numel; ++i) mean[i] += g[i] / num_workers;
      }
      for (size_t i = 0; i < numel; ++i)
        weights[key][i] -= kLearningRate * mean[i];
    }
  }
  return weights;
}

template <typename Message>
uint64_t Bytes(const std::vector<Message>& messages) {
  uint64_t total = 0;
  for (const Message& message : messages) total += message.ByteSizeLong();
  return total;
}

TEST(FakePsClientTest, InitPushPullReachTheOwningShards) {
  FakePsClient client(FakePsClient::MakeShards(2));
  ASSERT_EQ(client.num_shards(), 2u);

  const std::vector<v1::InitRequest> init = InitRequests(0, 1);
  std::vector<v1::InitResponse> init_responses;
  ASSERT_TRUE(client.Init(init, &init_responses).ok());
  ASSERT_EQ(init_responses.size(), 2u);
  EXPECT_TRUE(init_responses[0].initialized_now());
  EXPECT_TRUE(init_responses[1].initialized_now());
  EXPECT_EQ(init_responses[0].versions_size(), 2);
  EXPECT_EQ(init_responses[1].versions_size(), 1);

  const std::vector<v1::PushRequest> push = PushRequests(0, 0);
  std::vector<v1::PushResponse> push_responses;
  ASSERT_TRUE(client.Push(push, &push_responses).ok());
  ASSERT_EQ(push_responses[0].acks_size(), 2);
  EXPECT_EQ(push_responses[1].acks(0).key(), 1u);
  EXPECT_EQ(push_responses[1].acks(0).version(), 1u);

  const std::vector<v1::PullRequest> pull = PullRequests(0, 1);
  std::vector<v1::PullResponse> pull_responses;
  ASSERT_TRUE(client.Pull(pull, &pull_responses).ok());
  const auto weights = Weights(pull_responses);
  for (const auto& [key, expected] : Reference(1, 1)) {
    EXPECT_THAT(weights.at(key), ElementsAreArray(expected)) << "key " << key;
  }
  EXPECT_EQ(client.shard(1).Info().num_chunks(), 1u);

  const TrafficStats traffic = client.traffic();
  EXPECT_EQ(traffic.init_bytes_sent, Bytes(init));
  EXPECT_EQ(traffic.init_bytes_received, Bytes(init_responses));
  EXPECT_EQ(traffic.push_bytes_sent, Bytes(push));
  EXPECT_EQ(traffic.push_bytes_received, Bytes(push_responses));
  EXPECT_EQ(traffic.pull_bytes_sent, Bytes(pull));
  EXPECT_EQ(traffic.pull_bytes_received, Bytes(pull_responses));
  EXPECT_GT(traffic.pull_bytes_received, 19 * sizeof(float));
  EXPECT_EQ(traffic.retries, 0u);
}

TEST(FakePsClientTest, TwoWorkersSharingTheShardsRunBsp) {
  const auto shards = FakePsClient::MakeShards(2);
  constexpr uint64_t kSteps = 3;
  std::map<uint64_t, std::vector<float>> weights[2];
  std::vector<std::thread> workers;
  for (uint32_t worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&, worker] {
      FakePsClient client(shards);
      std::vector<v1::InitResponse> init;
      ASSERT_TRUE(client.Init(InitRequests(worker, 2), &init).ok());
      for (uint64_t step = 0; step < kSteps; ++step) {
        std::vector<v1::PushResponse> acks;
        ASSERT_TRUE(client.Push(PushRequests(worker, step), &acks).ok());
        std::vector<v1::PullResponse> pulled;
        const absl::Status s =
            client.Pull(PullRequests(worker, step + 1), &pulled);
        ASSERT_TRUE(s.ok()) << s;
        weights[worker] = Weights(pulled);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (const auto& [key, expected] : Reference(2, kSteps)) {
    EXPECT_THAT(weights[0][key], ElementsAreArray(expected)) << "key " << key;
    EXPECT_THAT(weights[1][key], ElementsAreArray(expected)) << "key " << key;
  }
}

TEST(FakePsClientTest, EmptyRequestsAreSkipped) {
  FakePsClient client(FakePsClient::MakeShards(2));
  std::vector<v1::InitResponse> init;
  ASSERT_TRUE(client.Init(InitRequests(0, 1), &init).ok());
  std::vector<v1::PushRequest> push = PushRequests(0, 0);
  push[1].clear_chunks();
  std::vector<v1::PushResponse> acks;
  ASSERT_TRUE(client.Push(push, &acks).ok());
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0].acks_size(), 2);
  EXPECT_EQ(acks[1].acks_size(), 0);
  EXPECT_EQ(client.traffic().push_bytes_sent, push[0].ByteSizeLong());
  EXPECT_EQ(client.shard(0).Info().max_version(), 1u);
  EXPECT_EQ(client.shard(1).Info().max_version(), 0u);
}

TEST(FakePsClientTest, ShardErrorsKeepTheirCodesAndNameTheShard) {
  FakePsClient client(FakePsClient::MakeShards(2), absl::Milliseconds(50));
  std::vector<v1::PushResponse> acks;
  absl::Status s = client.Push(PushRequests(0, 0), &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 0 (in-memory): Push: "));

  std::vector<v1::InitResponse> init;
  ASSERT_TRUE(client.Init(InitRequests(0, 1), &init).ok());

  // Chunk 0 belongs to shard 0; shard 1 refuses it.
  std::vector<v1::PushRequest> foreign = PushRequests(0, 0);
  // (In place of its own chunk: a push naming more chunks than the shard
  // owns is refused for that first, as INVALID_ARGUMENT.)
  *foreign[1].mutable_chunks(0) = foreign[0].chunks(0);
  s = client.Push(foreign, &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 1 (in-memory): Push: chunk 0"));
  // Shard 0 still took its part; shard 1 changed nothing.
  EXPECT_EQ(client.shard(0).Info().max_version(), 1u);
  EXPECT_EQ(client.shard(1).Info().max_version(), 0u);

  s = client.Push(PushRequests(/*worker=*/1, 1), &acks);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;

  std::vector<v1::PullResponse> pulled;
  s = client.Pull(PullRequests(0, /*min_step=*/5), &pulled);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 0 (in-memory): Pull: "));

  s = client.Pull(std::vector<v1::PullRequest>(3), &pulled);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace gradwire::testing
