#include "worker/training_defaults.h"

#include <algorithm>

#include "common/compress/registry.h"
#include "worker/sync_settings.h"

namespace gradwire {

v1::TrainingConfig TrainingWithDefaults(const SyncOptions& options) {
  v1::TrainingConfig config = options.training;
  if (config.mode() == v1::CONSISTENCY_MODE_UNSPECIFIED) {
    config.set_mode(v1::CONSISTENCY_MODE_BSP);
  }
  v1::OptimizerConfig* optimizer = config.mutable_optimizer();
  if (optimizer->kind() == v1::OPTIMIZER_KIND_UNSPECIFIED) {
    optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
  }
  if (optimizer->learning_rate() == 0) optimizer->set_learning_rate(0.01f);
  if (optimizer->schedule() == v1::LR_SCHEDULE_KIND_UNSPECIFIED) {
    optimizer->set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  }
  if (options.pull_deltas && config.pull_encoding().compressor().empty()) {
    v1::PullEncoding* encoding = config.mutable_pull_encoding();
    const CompressorOptions& push = options.compressor;
    encoding->set_compressor("topk");
    encoding->set_ratio(IsSparsifier(push.name) && push.ratio > 0
                            ? std::max(push.ratio, kMinAutoPullRatio)
                            : kDenseCompressorPullRatio);
    encoding->set_value_type(v1::VALUE_TYPE_FP16);
  }
  return config;
}

v1::TrainingConfig InitConfig(const SyncOptions& options,
                              const Partition& partition) {
  v1::TrainingConfig config = TrainingWithDefaults(options);
  config.set_num_workers(options.num_workers);
  config.set_num_shards(partition.num_shards());
  config.set_partition_bytes(options.partition_bytes);
  config.set_model_fingerprint(partition.plan_fingerprint());
  return config;
}

}  // namespace gradwire
