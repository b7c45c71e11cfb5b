#include "server/shard/shard_config.h"

#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "server/shard/shard.h"

namespace gradwire {
namespace {

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& format,
                     const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

template <typename... Args>
absl::Status Mismatch(const absl::FormatSpec<Args...>& format,
                      const Args&... args) {
  return absl::FailedPreconditionError(absl::StrFormat(format, args...));
}

absl::StatusOr<std::unique_ptr<Compressor>> MakePullCompressor(
    const v1::PullEncoding& encoding) {
  if (encoding.compressor().empty()) return std::unique_ptr<Compressor>();
  CompressorOptions options;
  options.name = encoding.compressor();
  options.ratio = encoding.ratio();
  if (encoding.value_type() != v1::VALUE_TYPE_UNSPECIFIED) {
    const auto precision = FromWire(encoding.value_type());
    if (!precision) {
      return Invalid("pull encoding: unknown value type %d",
                     static_cast<int>(encoding.value_type()));
    }
    options.precision = *precision;
  }
  auto compressor = MakeCompressor(options);
  if (!compressor.ok()) {
    return Invalid("pull encoding: %s", compressor.status().message());
  }
  return std::move(*compressor);
}

absl::Status CheckAgainstFlags(const v1::TrainingConfig& proto,
                               const ShardOptions& options) {
  if (proto.num_shards() != options.num_shards) {
    return Mismatch("config says %d shards but this shard runs with %d",
                    proto.num_shards(), options.num_shards);
  }
  if (options.num_workers != 0 && proto.num_workers() != options.num_workers) {
    return Mismatch("config says %d workers but this shard expects %d",
                    proto.num_workers(), options.num_workers);
  }
  if (options.mode != v1::CONSISTENCY_MODE_UNSPECIFIED &&
      proto.mode() != options.mode) {
    return Mismatch("config says mode %s but this shard runs %s",
                    v1::ConsistencyMode_Name(proto.mode()),
                    v1::ConsistencyMode_Name(options.mode));
  }
  if (options.mode == v1::CONSISTENCY_MODE_SSP &&
      proto.staleness() != options.staleness) {
    return Mismatch("config says staleness %d but this shard runs %d",
                    proto.staleness(), options.staleness);
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t DefaultPublishEvery(uint32_t num_workers) {
  return (uint64_t{num_workers} + 3) / 4;
}

absl::StatusOr<std::unique_ptr<const ShardConfig>> ShardConfig::FromProto(
    const v1::TrainingConfig& proto, const ShardOptions& options) {
  if (proto.num_workers() == 0 || proto.num_workers() > 65536) {
    return Invalid("num_workers %d is outside [1, 65536]", proto.num_workers());
  }
  if (proto.mode() != v1::CONSISTENCY_MODE_BSP &&
      proto.mode() != v1::CONSISTENCY_MODE_ASP &&
      proto.mode() != v1::CONSISTENCY_MODE_SSP) {
    return Invalid("consistency mode %d is not BSP, ASP or SSP",
                   static_cast<int>(proto.mode()));
  }
  if (absl::Status s = CheckAgainstFlags(proto, options); !s.ok()) return s;
  auto settings = OptimizerSettingsFromProto(proto.optimizer());
  if (!settings.ok()) return settings.status();
  auto pull = MakePullCompressor(proto.pull_encoding());
  if (!pull.ok()) return pull.status();
  if (settings->kind == OptimizerSettings::Kind::kMean) {
    // The weights are the last step's mean alone: a step in ASP/SSP is one
    // worker's push, and a delta from them means nothing.
    if (proto.mode() != v1::CONSISTENCY_MODE_BSP) {
      return Invalid("optimizer MEAN needs consistency mode BSP, not %d",
                     static_cast<int>(proto.mode()));
    }
    if (*pull != nullptr) {
      return Invalid(
          "optimizer MEAN answers pulls whole; pull compressor '%s' does not "
          "apply (leave pull_encoding empty)",
          proto.pull_encoding().compressor());
    }
  }

  auto config = std::make_unique<ShardConfig>();
  config->proto = proto;
  config->num_workers = proto.num_workers();
  config->rule = MakeConsistencyRule(proto.mode(), proto.staleness());
  config->optimizer_settings = *settings;
  config->optimizer = std::make_unique<Optimizer>(*settings);
  config->pull_compressor = std::move(*pull);
  if (config->rule->cadence() == UpdateCadence::kPerPush) {
    config->per_worker_deltas =
        options.async_pull_deltas == AsyncPullDeltas::kPerWorker;
    config->publish_every = options.async_publish_every != 0
                                ? options.async_publish_every
                                : DefaultPublishEvery(config->num_workers);
  }
  return std::unique_ptr<const ShardConfig>(std::move(config));
}

}  // namespace gradwire
