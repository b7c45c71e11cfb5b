// The training configuration a shard accepted at Init, validated and turned
// into the objects that run it (internal to server/).
#ifndef GRADWIRE_SERVER_SHARD_CONFIG_H_
#define GRADWIRE_SERVER_SHARD_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compress/compressor.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/optimizer.h"

namespace gradwire {

struct ShardOptions;

struct ShardConfig {
  // Validates `proto` and checks it against the shard's flags: num_shards
  // must equal the flag; num_workers and mode must equal theirs when set.
  // INVALID_ARGUMENT for a malformed config, FAILED_PRECONDITION for one
  // that contradicts the flags.
  static absl::StatusOr<std::unique_ptr<const ShardConfig>> FromProto(
      const v1::TrainingConfig& proto, const ShardOptions& options);

  v1::TrainingConfig proto;
  uint32_t num_workers = 1;
  v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_BSP;
  uint32_t staleness = 0;
  OptimizerSettings optimizer_settings;
  std::unique_ptr<Optimizer> optimizer;
  // Null when pulls are dense only.
  std::unique_ptr<Compressor> pull_compressor;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CONFIG_H_
