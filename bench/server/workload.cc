#include "bench/server/workload.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/common/synthetic_gradient.h"
#include "bench/common/zero_init.h"
#include "common/codec/codec.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "common/partition/partition.h"

namespace gradwire::bench {
namespace {

constexpr char kTensorName[] = "model.weights";
// Small enough that thousands of updates keep the weights far from overflow.
constexpr float kLearningRate = 0.01f;

v1::TrainingConfig TrainingConfigFor(const Partition& partition) {
  v1::TrainingConfig config;
  config.set_num_workers(1);
  config.set_mode(v1::CONSISTENCY_MODE_ASP);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  config.set_model_fingerprint(partition.fingerprint());
  config.set_num_shards(1);
  config.set_partition_bytes(partition.options().partition_bytes);
  return config;
}

// Appends `request` to `*load`, serialized and framed for the TCP bound
// as well.
void AddRequest(v1::PushRequest request, PusherLoad* load) {
  const std::string bytes = request.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  std::string frame(4, '\0');
  for (int b = 0; b < 4; ++b) frame[b] = static_cast<char>(length >> (8 * b));
  load->frames.push_back(frame + bytes);
  load->payload_bytes += bytes.size();
  load->requests.push_back(std::move(request));
}

// Builds pusher `worker`'s requests, `chunks_per_push` chunks each (0: all
// in one), into `*load`.
absl::Status BuildPusher(const Partition& partition,
                         const Compressor& compressor, uint64_t seed,
                         uint32_t worker, uint32_t chunks_per_push,
                         PusherLoad* load) {
  std::vector<float> gradient;
  CompressedChunk chunk;
  v1::PushRequest request;
  for (const ChunkSpec& spec : partition.ChunksOfShard(0)) {
    gradient.resize(spec.numel);
    FillSyntheticGradient(seed, uint64_t{worker} << 32 | spec.key,
                          absl::MakeSpan(gradient));
    CompressContext context;
    context.chunk_key = spec.key;
    if (absl::Status s = compressor.Compress(gradient, context, &chunk);
        !s.ok()) {
      return s;
    }
    if (request.chunks_size() == 0) {
      request.set_worker_id(worker);
      request.set_step(1);  // Any non-zero step serializes to the same size.
    }
    v1::ChunkGradient* pushed = request.add_chunks();
    pushed->set_key(spec.key);
    if (absl::Status s = EncodeChunk(chunk, pushed->mutable_gradient());
        !s.ok()) {
      return s;
    }
    load->selected += chunk.SelectedCount();
    if (chunks_per_push != 0 &&
        static_cast<uint32_t>(request.chunks_size()) == chunks_per_push) {
      AddRequest(std::move(request), load);
      request = v1::PushRequest();
    }
  }
  if (request.chunks_size() > 0) AddRequest(std::move(request), load);
  return absl::OkStatus();
}

}  // namespace

std::vector<PusherLoad> BuildDenseTcpLoads(uint64_t numel,
                                           uint64_t partition_bytes,
                                           uint32_t pushers) {
  const uint64_t chunk_numel = partition_bytes / sizeof(float);
  PusherLoad load;
  for (uint64_t begin = 0; begin < numel; begin += chunk_numel) {
    const uint64_t bytes = std::min(chunk_numel, numel - begin) * sizeof(float);
    std::string frame(4 + bytes, '\0');
    for (int b = 0; b < 4; ++b) {
      frame[b] = static_cast<char>(static_cast<uint32_t>(bytes) >> (8 * b));
    }
    load.frames.push_back(std::move(frame));
    load.payload_bytes += bytes;
  }
  load.selected = numel;
  return std::vector<PusherLoad>(pushers, load);
}

absl::StatusOr<Workload> BuildWorkload(const ServerBenchConfig& config,
                                       uint32_t max_pushers) {
  PartitionOptions options;
  options.partition_bytes = config.partition_bytes;
  options.num_shards = 1;
  absl::StatusOr<Partition> partition =
      Partition::Build({{kTensorName, config.numel}}, options);
  if (!partition.ok()) return partition.status();
  CompressorOptions push_options;
  push_options.name = config.compressor;
  push_options.ratio = config.density;
  // "none" is the dense fp32 exchange; everything else sends fp16 where it
  // has a precision to choose.
  push_options.precision = config.compressor == "none" ? ValuePrecision::kFp32
                                                       : ValuePrecision::kFp16;
  absl::StatusOr<std::unique_ptr<Compressor>> compressor =
      MakeCompressor(push_options);
  if (!compressor.ok()) return compressor.status();

  Workload workload;
  workload.numel = config.numel;
  workload.num_chunks = partition->num_chunks();
  if (absl::Status s = BuildZeroInit(TrainingConfigFor(*partition), *partition,
                                     0, kTensorName, &workload.init);
      !s.ok()) {
    return s;
  }
  workload.pushers.resize(max_pushers);
  for (uint32_t w = 0; w < max_pushers; ++w) {
    absl::Status s = BuildPusher(*partition, **compressor, config.seed, w,
                                 config.chunks_per_push, &workload.pushers[w]);
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("building the pushes of pusher ", w, ": ", s.message()));
    }
  }
  // What the pushes carry, measured: 1 for a dense compressor.
  workload.density = static_cast<double>(workload.pushers[0].selected) /
                     static_cast<double>(workload.numel);
  return workload;
}

const v1::InitRequest& ConfigureInit(uint32_t num_workers,
                                     v1::ConsistencyMode mode,
                                     Workload* workload) {
  workload->init.mutable_config()->set_num_workers(num_workers);
  workload->init.mutable_config()->set_mode(mode);
  return workload->init;
}

}  // namespace gradwire::bench
