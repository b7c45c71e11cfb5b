// Helpers shared by the Shard tests (shard_*_test.cc): configs, Init and
// Push requests, dense encodings and decodings. Each expected value in the
// tests is computed from these plain inputs, never read back from the shard.
#ifndef GRADWIRE_TESTS_SERVER_SHARD_SHARD_TEST_UTIL_H_
#define GRADWIRE_TESTS_SERVER_SHARD_SHARD_TEST_UTIL_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"

namespace gradwire {
namespace shard_test {

inline constexpr uint32_t kShardId = 2;
inline constexpr uint32_t kNumShards = 4;
inline constexpr float kLearningRate = 0.5f;
// The history epoch of Options(): fixed, so that answers can be compared.
inline constexpr uint64_t kHistoryEpoch = 0x5eed0000e90c4001;

// Two chunks of different sizes with keys that are not 0 and not adjacent.
inline constexpr uint64_t kKeyA = 7;
inline constexpr uint64_t kKeyB = 19;
inline constexpr uint64_t kNumelA = 8;
inline constexpr uint64_t kNumelB = 5;

inline ShardOptions Options() {
  ShardOptions options;
  options.shard_id = kShardId;
  options.num_shards = kNumShards;
  options.history_epoch = kHistoryEpoch;
  return options;
}

// SGD at kLearningRate, constant schedule, dense pulls.
inline v1::TrainingConfig Config(uint32_t num_workers, v1::ConsistencyMode mode,
                                 uint32_t staleness = 0) {
  v1::TrainingConfig config;
  config.set_num_workers(num_workers);
  config.set_mode(mode);
  config.set_staleness(staleness);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  config.set_model_fingerprint(0x5eed);
  config.set_num_shards(kNumShards);
  config.set_partition_bytes(uint64_t{4} << 20);
  return config;
}

// Deterministic, distinct initial weights: exact dyadic values.
inline std::vector<float> InitialWeights(uint64_t key, uint64_t numel) {
  std::vector<float> weights(numel);
  for (uint64_t i = 0; i < numel; ++i) {
    weights[i] =
        static_cast<float>(key) * 0.25f + static_cast<float>(i) * 0.125f - 1.0f;
  }
  return weights;
}

// A gradient that differs by worker, step and element: multiples of 1/64 in
// [-0.5, 0.5), so sums of a few of them are exact in float.
inline std::vector<float> Gradient(uint32_t worker, uint64_t step,
                                   uint64_t numel) {
  std::vector<float> g(numel);
  for (uint64_t i = 0; i < numel; ++i) {
    const uint64_t h = (worker + 1) * 37 + step * 11 + i * 7 + i * i;
    g[i] = static_cast<float>(static_cast<int>(h % 64) - 32) / 64.0f;
  }
  return g;
}

// Dense values of `precision` (values must be representable in it).
inline v1::ChunkData DenseData(
    absl::Span<const float> values,
    ValuePrecision precision = ValuePrecision::kFp32) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kDense;
  chunk.numel = values.size();
  chunk.precision = precision;
  chunk.values.assign(values.begin(), values.end());
  v1::ChunkData data;
  const absl::Status s = EncodeChunk(chunk, &data);
  EXPECT_TRUE(s.ok()) << s;
  return data;
}

// `values` through the named compressor (no error feedback) and the codec.
inline v1::ChunkData CompressedData(const std::string& name,
                                    absl::Span<const float> values,
                                    double ratio = 0.25) {
  CompressorOptions options;
  options.name = name;
  options.ratio = ratio;
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok()) << compressor.status();
  CompressedChunk chunk;
  const absl::Status s =
      (*compressor)->Compress(values, CompressContext{}, &chunk);
  EXPECT_TRUE(s.ok()) << s;
  v1::ChunkData data;
  const absl::Status e = EncodeChunk(chunk, &data);
  EXPECT_TRUE(e.ok()) << e;
  return data;
}

// What a receiver sees: `data` decoded and decompressed to numel floats.
inline std::vector<float> Decoded(const v1::ChunkData& data, uint64_t numel) {
  DecodeOptions options;
  options.expected_numel = numel;
  CompressedChunk chunk;
  const absl::Status s = DecodeChunk(data, options, &chunk);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<float> dense(numel, 0.0f);
  if (s.ok()) DecompressInto(chunk, absl::MakeSpan(dense));
  return dense;
}

struct ChunkSpec {
  uint64_t key;
  std::vector<float> initial;
};

inline std::vector<ChunkSpec> DefaultChunks() {
  return {{kKeyA, InitialWeights(kKeyA, kNumelA)},
          {kKeyB, InitialWeights(kKeyB, kNumelB)}};
}

inline v1::InitRequest InitRequest(uint32_t worker,
                                   const v1::TrainingConfig& config,
                                   const std::vector<ChunkSpec>& chunks,
                                   uint32_t shard_id = kShardId) {
  v1::InitRequest request;
  request.set_worker_id(worker);
  request.set_shard_id(shard_id);
  *request.mutable_config() = config;
  for (const ChunkSpec& spec : chunks) {
    v1::ChunkDeclaration* declaration = request.add_chunks();
    declaration->set_key(spec.key);
    declaration->set_tensor_name("layer." + std::to_string(spec.key));
    declaration->set_offset(spec.key * 1000);
    *declaration->mutable_initial() = DenseData(spec.initial);
  }
  return request;
}

// A shard initialised by worker 0 with `config` and `chunks`.
inline std::unique_ptr<Shard> StartShard(
    const v1::TrainingConfig& config,
    const std::vector<ChunkSpec>& chunks = DefaultChunks(),
    ShardOptions options = Options()) {
  auto shard = std::make_unique<Shard>(options);
  v1::InitResponse response;
  const absl::Status s = shard->Init(InitRequest(0, config, chunks), &response);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(response.initialized_now());
  return shard;
}

// A sparse fp32 chunk of `numel` with `values` at the increasing `indices`.
inline v1::ChunkData SparseData(uint64_t numel,
                                const std::vector<uint32_t>& indices,
                                const std::vector<float>& values) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kSparse;
  chunk.numel = numel;
  chunk.indices = indices;
  chunk.values = values;
  v1::ChunkData data;
  EXPECT_TRUE(EncodeChunk(chunk, &data).ok());
  return data;
}

inline v1::PushRequest PushRequest(
    uint32_t worker, uint64_t step,
    std::vector<std::pair<uint64_t, v1::ChunkData>> chunks) {
  v1::PushRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  for (auto& [key, data] : chunks) {
    v1::ChunkGradient* gradient = request.add_chunks();
    gradient->set_key(key);
    *gradient->mutable_gradient() = std::move(data);
  }
  return request;
}

// One chunk's Gradient(worker, step) pushed dense.
inline v1::PushRequest DensePush(uint32_t worker, uint64_t step, uint64_t key,
                                 uint64_t numel) {
  return PushRequest(worker, step,
                     {{key, DenseData(Gradient(worker, step, numel))}});
}

inline absl::StatusOr<v1::PushResponse> Push(Shard& shard,
                                             const v1::PushRequest& request) {
  v1::PushResponse response;
  if (absl::Status s = shard.Push(request, &response); !s.ok()) return s;
  return response;
}

// The ack of a successful push of one chunk; fails the test on an error.
inline v1::ChunkAck PushOne(Shard& shard, const v1::PushRequest& request) {
  auto response = Push(shard, request);
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok() || response->acks_size() != 1) return v1::ChunkAck();
  return response->acks(0);
}

// Float results against doubles: values around 1, a few dozen updates.
inline constexpr double kSgdTolerance = 1e-5;

// `weights` after one SGD step (kLearningRate) with the mean of `gradients`,
// computed in double.
inline std::vector<double> SgdWithMean(
    const std::vector<double>& weights,
    const std::vector<std::vector<float>>& gradients) {
  std::vector<double> out = weights;
  for (size_t i = 0; i < out.size(); ++i) {
    double sum = 0.0;
    for (const std::vector<float>& g : gradients) sum += g[i];
    out[i] -= double{kLearningRate} * sum / gradients.size();
  }
  return out;
}

inline void ExpectNear(const std::vector<float>& actual,
                       const std::vector<double>& expected,
                       double tol = kSgdTolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
  }
}

// Dense fp32 pull of one chunk, no waiting, no delta.
inline absl::StatusOr<v1::ChunkWeights> PullDense(Shard& shard, uint64_t key,
                                                  uint32_t worker = 0) {
  v1::PullRequest request;
  request.set_worker_id(worker);
  request.add_chunks()->set_key(key);
  v1::PullResponse response;
  if (absl::Status s =
          shard.Pull(request, absl::Now() + absl::Seconds(5), &response);
      !s.ok()) {
    return s;
  }
  if (response.chunks_size() != 1) return absl::InternalError("no chunk");
  return response.chunks(0);
}

// The chunk's current weights (dense fp32 pull, decoded).
inline std::vector<float> Weights(Shard& shard, uint64_t key, uint64_t numel) {
  auto pulled = PullDense(shard, key);
  EXPECT_TRUE(pulled.ok()) << pulled.status();
  if (!pulled.ok()) return {};
  return Decoded(pulled->data(), numel);
}

// What one worker holds of one chunk, and how it pulls it with deltas.
struct DeltaHolder {
  DeltaHolder(uint64_t key, uint64_t numel) : key(key), numel(numel) {}

  uint64_t key;
  uint64_t numel;
  uint32_t worker = 0;
  // Whether its requests take chains of deltas (allow_delta_chain).
  bool chain = true;
  // Nothing held yet: a version no chunk reaches.
  uint64_t version = std::numeric_limits<uint64_t>::max();
  uint64_t epoch = 0;
  std::vector<float> weights;

  // Pulls with deltas allowed and applies the answer, each delta of a chain
  // in turn; returns it.
  v1::ChunkWeights Pull(Shard& shard, uint64_t min_step = 0) {
    v1::PullRequest request;
    request.set_worker_id(worker);
    request.set_allow_delta(true);
    request.set_allow_delta_chain(chain);
    v1::ChunkPull* pull = request.add_chunks();
    pull->set_key(key);
    pull->set_have_version(version);
    pull->set_have_epoch(epoch);
    pull->set_min_step(min_step);
    v1::PullResponse response;
    const absl::Status s =
        shard.Pull(request, absl::Now() + absl::Seconds(5), &response);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return v1::ChunkWeights();
    const v1::ChunkWeights& answer = response.chunks(0);
    if (answer.is_delta()) {
      Add(answer.data());
      for (const v1::ChunkData& more : answer.chain()) Add(more);
    } else {
      EXPECT_EQ(answer.chain_size(), 0);
      weights = Decoded(answer.data(), numel);
    }
    version = answer.version();
    epoch = response.history_epoch();
    return answer;
  }

  void Add(const v1::ChunkData& delta) {
    const std::vector<float> values = Decoded(delta, numel);
    for (uint64_t i = 0; i < numel; ++i) weights[i] += values[i];
  }
};

}  // namespace shard_test
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_SERVER_SHARD_SHARD_TEST_UTIL_H_
