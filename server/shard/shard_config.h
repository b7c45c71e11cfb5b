// The training configuration a shard accepted at Init, validated and turned
// into the objects that run it: the consistency rule, the optimizer and the
// pull compressor (internal to server/shard/).
#ifndef GRADWIRE_SERVER_SHARD_SHARD_CONFIG_H_
#define GRADWIRE_SERVER_SHARD_SHARD_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compress/compressor.h"
#include "common/consistency/consistency_rule.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/optimizer.h"

namespace gradwire {

struct ShardOptions;

// ASP/SSP shared pull deltas: updates between two publications of a chunk
// when the shard's option leaves it to the job, ceil(num_workers / 4).
// Between two pulls of one worker every other worker pushes about once, so
// the worker is about 4 publications behind: its answer is a chain of about
// 4 deltas (well within PublishedDeltas::kMaxKept) and misses at most a
// quarter of a round of updates. Sharing one delta among all workers
// (num_workers) costs accuracy against publishing every update, since a
// pull then misses the newest updates on top of ASP's staleness
// (docs/convergence.md#asp-and-ssp-with-shared-published-deltas).
uint64_t DefaultPublishEvery(uint32_t num_workers);

struct ShardConfig {
  // Validates `proto` and checks it against the shard's flags: num_shards
  // must equal the flag; num_workers and mode must equal theirs when set.
  // INVALID_ARGUMENT for a malformed config (optimizer MEAN outside BSP or
  // beside a pull compressor included), FAILED_PRECONDITION for one that
  // contradicts the flags.
  static absl::StatusOr<std::unique_ptr<const ShardConfig>> FromProto(
      const v1::TrainingConfig& proto, const ShardOptions& options);

  v1::TrainingConfig proto;
  uint32_t num_workers = 1;
  // The mode's rule (BSP, ASP or SSP with the config's staleness): which
  // pushes the chunks accept and when their clocks move.
  std::unique_ptr<const ConsistencyRule> rule;
  OptimizerSettings optimizer_settings;
  std::unique_ptr<Optimizer> optimizer;
  // Null when pulls are dense only.
  std::unique_ptr<Compressor> pull_compressor;
  // With a pull compressor: true when ASP/SSP pulls are answered from
  // per-worker replicas (worker_replicas.h), false when every mode answers
  // the chunk's shared published deltas (published_deltas.h).
  bool per_worker_deltas = false;
  // Shared deltas: the chunk publishes after this many optimizer updates
  // (BSP: 1, every update; ASP/SSP: the shard's option, by default
  // DefaultPublishEvery).
  uint64_t publish_every = 1;

  // Whether the chunks keep the shared shadow and publish deltas.
  bool shared_deltas() const {
    return pull_compressor != nullptr && !per_worker_deltas;
  }
  // Whether the weights are the last step's mean (optimizer MEAN, BSP, no
  // pull compressor), which pulls answer whole: their nonzero elements
  // where that is smaller than dense (shard_pull.cc).
  bool answers_means() const {
    return optimizer_settings.kind == OptimizerSettings::Kind::kMean;
  }
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SHARD_CONFIG_H_
