#include "tests/fuzz/shard_fuzz_util.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/registry.h"
#include "google/protobuf/stubs/logging.h"

namespace gradwire::fuzz {

bool Verbose() {
  static const bool verbose = std::getenv("GRADWIRE_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

uint8_t InputReader::Byte() {
  return position_ < size_ ? data_[position_++] : 0;
}

absl::string_view InputReader::Message() {
  const size_t length = Byte() | (size_t{Byte()} << 8);
  const size_t available = std::min(length, size_ - std::min(position_, size_));
  const absl::string_view message(
      reinterpret_cast<const char*>(data_) + position_, available);
  position_ += available;
  return message;
}

absl::string_view InputReader::Rest() {
  const size_t start = std::min(position_, size_);
  position_ = size_;
  return absl::string_view(reinterpret_cast<const char*>(data_) + start,
                           size_ - start);
}

InputWriter& InputWriter::Byte(uint8_t value) {
  bytes_.push_back(static_cast<char>(value));
  return *this;
}

InputWriter& InputWriter::Message(
    const google::protobuf::MessageLite& message) {
  return Bytes(message.SerializeAsString());
}

InputWriter& InputWriter::Bytes(absl::string_view bytes) {
  // Seeds are small; a longer one would not round-trip through Message.
  Check(bytes.size() <= 0xffff);
  Byte(bytes.size() & 0xff);
  Byte(bytes.size() >> 8);
  bytes_.append(bytes.data(), bytes.size());
  return *this;
}

InputWriter& InputWriter::Tail(absl::string_view bytes) {
  bytes_.append(bytes.data(), bytes.size());
  return *this;
}

// Setup byte: mode = byte % 3 (BSP, ASP, SSP), then one bit each for pull
// deltas and a third worker.
ShardSetup ShardSetup::FromByte(uint8_t byte) {
  static constexpr v1::ConsistencyMode kModes[] = {v1::CONSISTENCY_MODE_BSP,
                                                   v1::CONSISTENCY_MODE_ASP,
                                                   v1::CONSISTENCY_MODE_SSP};
  ShardSetup setup;
  setup.mode = kModes[byte % 3];
  setup.pull_deltas = (byte / 3) & 1;
  setup.num_workers = 2 + ((byte / 6) & 1);
  return setup;
}

uint8_t ShardSetup::ToByte() const {
  const int mode_index = mode == v1::CONSISTENCY_MODE_BSP   ? 0
                         : mode == v1::CONSISTENCY_MODE_ASP ? 1
                                                            : 2;
  return static_cast<uint8_t>(mode_index + 3 * (pull_deltas ? 1 : 0) +
                              6 * (num_workers - 2));
}

v1::TrainingConfig MakeConfig(const ShardSetup& setup) {
  v1::TrainingConfig config;
  config.set_num_workers(setup.num_workers);
  config.set_mode(setup.mode);
  if (setup.mode == v1::CONSISTENCY_MODE_SSP) {
    config.set_staleness(setup.staleness);
  }
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  if (setup.pull_deltas) {
    config.mutable_pull_encoding()->set_compressor("topk");
    config.mutable_pull_encoding()->set_ratio(0.5);
    config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  }
  config.set_model_fingerprint(0x5eed);
  config.set_num_shards(kNumShards);
  config.set_partition_bytes(uint64_t{4} << 20);
  return config;
}

std::vector<float> InitialWeights(size_t index) {
  std::vector<float> weights(kChunkNumels[index]);
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<float>(index) * 0.25f +
                 static_cast<float>(i) * 0.125f - 1.0f;
  }
  return weights;
}

v1::InitRequest MakeInit(const v1::TrainingConfig& config, uint32_t worker) {
  v1::InitRequest request;
  request.set_worker_id(worker);
  request.set_shard_id(kShardId);
  *request.mutable_config() = config;
  for (size_t i = 0; i < kNumChunks; ++i) {
    v1::ChunkDeclaration* declaration = request.add_chunks();
    declaration->set_key(kChunkKeys[i]);
    declaration->set_tensor_name("layer." + std::to_string(kChunkKeys[i]));
    declaration->set_offset(kChunkKeys[i] * 100);
    *declaration->mutable_initial() = DenseData(InitialWeights(i));
  }
  return request;
}

ShardOptions MakeShardOptions() {
  ShardOptions options;
  options.shard_id = kShardId;
  options.num_shards = kNumShards;
  options.max_chunk_numel = kMaxChunkNumel;
  options.max_chunks = kMaxChunks;
  options.max_init_overhead_bytes = kMaxInitOverheadBytes;
  return options;
}

std::vector<float> GradientValues(uint64_t numel, uint64_t seed) {
  std::vector<float> values(numel);
  for (uint64_t i = 0; i < numel; ++i) {
    const uint64_t h = (seed + 1) * 0x9e3779b97f4a7c15ull + i * 0x2545f491ull;
    values[i] =
        static_cast<float>(static_cast<int>((h >> 32) % 128) - 64) / 16.0f;
  }
  return values;
}

v1::ChunkData DenseData(absl::Span<const float> values) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kDense;
  chunk.numel = values.size();
  chunk.values.assign(values.begin(), values.end());
  v1::ChunkData data;
  // Cannot fail: a dense fp32 chunk of a few elements is well formed.
  Check(EncodeChunk(chunk, &data).ok());
  return data;
}

v1::ChunkData CompressedData(const std::string& name,
                             absl::Span<const float> values, uint64_t key,
                             uint64_t step) {
  CompressorOptions options;
  options.name = name;
  options.ratio = 0.5;
  auto compressor = MakeCompressor(options);
  CompressedChunk chunk;
  v1::ChunkData data;
  if (!compressor.ok() ||
      !(*compressor)->Compress(values, {key, step, 0}, &chunk).ok() ||
      !EncodeChunk(chunk, &data).ok()) {
    return DenseData(values);
  }
  return data;
}

const std::vector<std::string>& GradientEncodings() {
  static const auto* names = new std::vector<std::string>{
      "none", "fp16", "bf16", "topk", "randomk", "qsgd", "onebit"};
  return *names;
}

v1::PushRequest MakePush(
    uint32_t worker, uint64_t step,
    const std::vector<std::pair<uint64_t, v1::ChunkData>>& chunks) {
  v1::PushRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  for (const auto& [key, data] : chunks) {
    v1::ChunkGradient* gradient = request.add_chunks();
    gradient->set_key(key);
    *gradient->mutable_gradient() = data;
  }
  return request;
}

}  // namespace gradwire::fuzz
