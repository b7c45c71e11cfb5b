#include "bench/load/workload.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/common/synthetic_gradient.h"
#include "bench/common/zero_init.h"
#include "common/codec/codec.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "common/usable_cpus.h"

namespace gradwire::bench {
namespace {

constexpr char kTensorName[] = "model.weights";
// Small enough that tens of thousands of ASP updates keep the weights far
// from overflow.
constexpr float kLearningRate = 0.01f;

v1::TrainingConfig TrainingConfigFor(const LoadBenchConfig& config,
                                     const Partition& partition) {
  v1::TrainingConfig training;
  training.set_num_workers(config.workers);
  training.set_mode(config.mode);
  if (config.mode == v1::CONSISTENCY_MODE_SSP) {
    training.set_staleness(config.staleness);
  }
  v1::OptimizerConfig* optimizer = training.mutable_optimizer();
  optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
  optimizer->set_learning_rate(kLearningRate);
  if (config.optimizer != "sgd") {
    optimizer->set_kind(v1::OPTIMIZER_KIND_ADAM);
    optimizer->set_momentum(0.9f);
    optimizer->set_beta2(0.999f);
    // The pushes are sparse from the first one, so most of a chunk's
    // second moment stays 0: an epsilon of 1 keeps those steps finite
    // (at most lr * |g|). The arithmetic per element is the same.
    optimizer->set_epsilon(1.0f);
    if (config.optimizer == "1bit-adam") {
      optimizer->set_freeze_variance_after(1);
    }
  }
  optimizer->set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  if (config.delta_pulls) {
    // What gradwire-worker declares for delta pulls by default: Top-K at
    // the push's ratio, fp16 values.
    v1::PullEncoding* encoding = training.mutable_pull_encoding();
    encoding->set_compressor("topk");
    encoding->set_ratio(config.pull_ratio > 0 ? config.pull_ratio
                                              : config.density);
    encoding->set_value_type(v1::VALUE_TYPE_FP16);
  }
  training.set_model_fingerprint(partition.plan_fingerprint());
  training.set_num_shards(config.shards);
  training.set_partition_bytes(config.partition_bytes);
  return training;
}

// Worker `worker`'s pushes; `feedback` is scratch (one state per chunk).
absl::Status BuildWorkerPushes(const LoadBenchConfig& config,
                               const Partition& partition,
                               const Compressor& topk, uint32_t worker,
                               WorkerPushes* out) {
  std::vector<FeedbackState> feedback(partition.num_chunks());
  std::vector<float> gradient;
  CompressedChunk chunk;
  out->variants.resize(config.distinct_gradients);
  for (int v = 0; v < config.distinct_gradients; ++v) {
    std::vector<v1::PushRequest>& requests = out->variants[v];
    requests.resize(config.shards);
    for (uint32_t s = 0; s < config.shards; ++s) {
      requests[s].set_worker_id(worker);
    }
    for (const ChunkSpec& spec : partition.chunks()) {
      gradient.resize(spec.numel);
      const uint64_t stream =
          (uint64_t{worker} << 40) | (uint64_t(v) << 32) | spec.key;
      FillSyntheticGradient(config.seed, stream, absl::MakeSpan(gradient));
      CompressContext context;
      context.chunk_key = spec.key;
      context.step = v;
      absl::Status s = topk.CompressWithFeedback(gradient, context,
                                                 &feedback[spec.key], &chunk);
      v1::ChunkGradient* pushed = requests[spec.shard].add_chunks();
      pushed->set_key(spec.key);
      if (s.ok()) s = EncodeChunk(chunk, pushed->mutable_gradient());
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("worker ", worker, " chunk ", spec.key, ": ",
                                   s.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadModel> BuildLoadModel(const LoadBenchConfig& config) {
  PartitionOptions options;
  options.partition_bytes = config.partition_bytes;
  options.num_shards = config.shards;
  absl::StatusOr<Partition> partition =
      Partition::Build({{kTensorName, config.params}}, options);
  if (!partition.ok()) return partition.status();
  if (partition->num_chunks() < config.shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--params=", config.params,
        " at --partition-bytes=", config.partition_bytes, " makes ",
        partition->num_chunks(), " chunks, fewer than --shards=", config.shards,
        "; lower --partition-bytes"));
  }
  LoadModel model;
  model.partition = std::make_unique<Partition>(*std::move(partition));
  const v1::TrainingConfig training =
      TrainingConfigFor(config, *model.partition);
  model.inits.resize(config.shards);
  for (uint32_t s = 0; s < config.shards; ++s) {
    if (absl::Status st = BuildZeroInit(training, *model.partition, s,
                                        kTensorName, &model.inits[s]);
        !st.ok()) {
      return st;
    }
  }
  return model;
}

absl::StatusOr<std::vector<WorkerPushes>> BuildAllPushes(
    const LoadBenchConfig& config, const Partition& partition) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = config.density;
  options.precision = config.push_precision;
  absl::StatusOr<std::unique_ptr<Compressor>> topk = MakeCompressor(options);
  if (!topk.ok()) return topk.status();
  std::vector<WorkerPushes> pushes(config.workers);
  std::vector<absl::Status> results(config.workers);
  const uint32_t threads = std::clamp<uint32_t>(
      static_cast<uint32_t>(UsableCpus()), 1, std::min(config.workers, 8u));
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (uint32_t w = t; w < config.workers; w += threads) {
        results[w] =
            BuildWorkerPushes(config, partition, **topk, w, &pushes[w]);
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return pushes;
}

}  // namespace gradwire::bench
