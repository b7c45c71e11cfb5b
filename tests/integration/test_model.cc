#include "tests/integration/test_model.h"

#include <cmath>
#include <limits>
#include <random>

#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"

namespace gradwire::testing {

std::vector<float> RandomValues(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

std::vector<TestChunk> MakeChunks(const std::vector<size_t>& numels,
                                  uint64_t seed) {
  std::vector<TestChunk> chunks;
  for (size_t i = 0; i < numels.size(); ++i) {
    chunks.push_back({i, RandomValues(numels[i], seed * 1000 + i)});
  }
  return chunks;
}

v1::TrainingConfig SgdConfig(uint32_t num_workers, v1::ConsistencyMode mode) {
  v1::TrainingConfig config;
  config.set_num_workers(num_workers);
  config.set_mode(mode);
  config.set_num_shards(1);
  config.set_partition_bytes(4 << 20);
  config.set_model_fingerprint(0x6772616477697265ull);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  return config;
}

absl::Status InitBspWorkers(v1::ParameterServer::Stub* stub,
                            const std::vector<TestChunk>& chunks,
                            uint32_t num_workers) {
  for (uint32_t worker = 0; worker < num_workers; ++worker) {
    grpc::ClientContext context;
    SetTimeout(&context);
    v1::InitResponse response;
    const grpc::Status s =
        stub->Init(&context,
                   MakeInit(SgdConfig(num_workers, v1::CONSISTENCY_MODE_BSP),
                            chunks, worker),
                   &response);
    if (!s.ok()) return ToAbsl(s);
  }
  return absl::OkStatus();
}

v1::ChunkData DenseData(const std::vector<float>& values) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kDense;
  chunk.numel = values.size();
  chunk.values = values;
  v1::ChunkData data;
  EncodeChunk(chunk, &data).IgnoreError();  // Well formed by construction.
  return data;
}

v1::InitRequest MakeInit(const v1::TrainingConfig& config,
                         const std::vector<TestChunk>& chunks,
                         uint32_t worker_id) {
  v1::InitRequest request;
  request.set_worker_id(worker_id);
  request.set_shard_id(0);
  *request.mutable_config() = config;
  for (const TestChunk& chunk : chunks) {
    v1::ChunkDeclaration* declaration = request.add_chunks();
    declaration->set_key(chunk.key);
    declaration->set_tensor_name("layer" + std::to_string(chunk.key));
    *declaration->mutable_initial() = DenseData(chunk.initial);
  }
  return request;
}

absl::StatusOr<std::vector<float>> DecodeToDense(const v1::ChunkData& data,
                                                 uint64_t numel) {
  DecodeOptions options;
  options.expected_numel = numel;
  CompressedChunk chunk;
  if (absl::Status s = DecodeChunk(data, options, &chunk); !s.ok()) return s;
  std::vector<float> dense(numel);
  DecompressInto(chunk, absl::MakeSpan(dense));
  return dense;
}

void SetTimeout(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::map<uint64_t, std::vector<float>>> PullDense(
    v1::ParameterServer::Stub* stub, uint32_t worker_id,
    const std::vector<TestChunk>& chunks, uint64_t min_step,
    absl::Duration timeout) {
  v1::PullRequest request;
  request.set_worker_id(worker_id);
  for (const TestChunk& chunk : chunks) {
    v1::ChunkPull* pull = request.add_chunks();
    pull->set_key(chunk.key);
    pull->set_min_step(min_step);
  }
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  v1::PullResponse response;
  if (grpc::Status s = stub->Pull(&context, request, &response); !s.ok()) {
    return ToAbsl(s);
  }
  if (response.chunks_size() != static_cast<int>(chunks.size())) {
    return absl::InternalError("pull answered the wrong number of chunks");
  }
  std::map<uint64_t, std::vector<float>> weights;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const v1::ChunkWeights& answer = response.chunks(i);
    if (answer.key() != chunks[i].key || answer.is_delta()) {
      return absl::InternalError("pull answered an unexpected chunk or delta");
    }
    auto dense = DecodeToDense(answer.data(), chunks[i].initial.size());
    if (!dense.ok()) return dense.status();
    weights[answer.key()] = *std::move(dense);
  }
  return weights;
}

DenseReference::DenseReference(const std::vector<TestChunk>& chunks,
                               uint32_t num_workers)
    : share_(1.0f / static_cast<float>(num_workers)) {
  for (const TestChunk& chunk : chunks) weights_[chunk.key] = chunk.initial;
}

void DenseReference::AddPush(uint64_t key, const std::vector<float>& gradient) {
  std::vector<float>& sum = accumulators_[key];
  sum.resize(gradient.size(), 0.0f);
  for (size_t i = 0; i < gradient.size(); ++i) sum[i] += share_ * gradient[i];
}

void DenseReference::FinishStep() {
  for (auto& [key, sum] : accumulators_) {
    std::vector<float>& w = weights_.at(key);
    for (size_t i = 0; i < w.size(); ++i) w[i] += -kLearningRate * sum[i];
  }
  accumulators_.clear();
}

double MaxRelativeDifference(const std::vector<float>& a,
                             const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(1.0, std::fabs(static_cast<double>(b[i])));
    const double difference = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(difference)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, difference / scale);
  }
  return worst;
}

}  // namespace gradwire::testing
