#include "server/process/server_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/process/memory_limit.h"
#include "server/process/worker_tokens.h"

namespace gradwire {
namespace {

absl::Status OutOfBounds(absl::string_view flag, int64_t value,
                         absl::string_view bounds) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--%s=%d: must be %s", flag, value, bounds));
}

// Zero would refuse every Init.
absl::Status CheckInitBudget(const ServerOptions& o) {
  if (o.max_chunks < 1) {
    return OutOfBounds("max-chunks", o.max_chunks, ">= 1");
  }
  if (o.max_init_overhead_bytes < 1) {
    return OutOfBounds("max-init-overhead-bytes", o.max_init_overhead_bytes,
                       ">= 1");
  }
  if (o.async_publish_every < 0) {
    return OutOfBounds("async-publish-every", o.async_publish_every, ">= 0");
  }
  if (o.max_replica_bytes < 0) {
    return OutOfBounds("max-replica-bytes", o.max_replica_bytes, ">= 0");
  }
  return absl::OkStatus();
}

// The pools' threads and the calls their queues hold.
absl::Status CheckThreadsAndQueues(const ServerOptions& o) {
  if (o.threads < 0 || o.threads > 100000) {
    return OutOfBounds("threads", o.threads,
                       "0 (one per core) or in [1, 100000]");
  }
  if (o.pull_threads < 0 || o.pull_threads > 100000) {
    return OutOfBounds("pull-threads", o.pull_threads,
                       "0 (from --num-workers) or in [1, 100000]");
  }
  if (o.apply_threads < -1 || o.apply_threads > 1024) {
    return OutOfBounds("apply-threads", o.apply_threads,
                       "-1 (one less than the usable cores) or in [0, 1024]");
  }
  if (o.max_concurrent_streams < 1 || o.max_concurrent_streams > 1000000) {
    return OutOfBounds("max-concurrent-streams", o.max_concurrent_streams,
                       "in [1, 1000000]");
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"max-queued-calls", o.max_queued_calls},
        {"max-calls-per-connection", o.max_calls_per_connection},
        {"max-waiting-pulls-per-worker", o.max_waiting_pulls_per_worker}}) {
    if (value < 1 || value > 100000000) {
      return OutOfBounds(flag, value, "in [1, 100000000]");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNumbers(const ServerOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    return OutOfBounds("port", o.port, "in [0, 65535]");
  }
  if (o.num_shards < 1 || o.num_shards > UINT32_MAX) {
    return OutOfBounds("num-shards", o.num_shards, ">= 1");
  }
  if (o.shard_id < 0 || o.shard_id >= o.num_shards) {
    return OutOfBounds(
        "shard-id", o.shard_id,
        absl::StrFormat("in [0, --num-shards=%d)", o.num_shards));
  }
  if (o.num_workers < 0 || o.num_workers > 65536) {
    return OutOfBounds("num-workers", o.num_workers,
                       "in [0, 65536] (0 accepts what Init declares)");
  }
  if (o.staleness < 0 || o.staleness > UINT32_MAX) {
    return OutOfBounds("staleness", o.staleness, ">= 0");
  }
  if (o.checkpoint_every < 0) {
    return OutOfBounds("checkpoint-every", o.checkpoint_every, ">= 0");
  }
  if (absl::Status s = CheckThreadsAndQueues(o); !s.ok()) return s;
  if (o.max_message_bytes < 1024 ||
      o.max_message_bytes > std::numeric_limits<int32_t>::max()) {
    return OutOfBounds("max-message-bytes", o.max_message_bytes,
                       "in [1024, 2147483647]");
  }
  if (o.memory_quota_bytes < 2 * o.max_message_bytes) {
    return OutOfBounds("memory-quota-bytes", o.memory_quota_bytes,
                       ">= 2 * --max-message-bytes (a request and its answer)");
  }
  if (o.memory_budget_bytes < 2 * o.max_message_bytes) {
    return OutOfBounds(
        "memory-budget-bytes", o.memory_budget_bytes,
        absl::StrFormat(">= 2 * --max-message-bytes (%d): a decoded push and "
                        "a pull answer of the largest size must fit",
                        2 * o.max_message_bytes));
  }
  if (o.memory_limit_bytes < -1) {
    return OutOfBounds("memory-limit-bytes", o.memory_limit_bytes,
                       ">= -1 (-1: detect, 0: none)");
  }
  return CheckInitBudget(o);
}

absl::Status CheckWriteAheadLog(const ServerOptions& o) {
  if (o.wal_checkpoint_bytes < 0) {
    return OutOfBounds("wal-checkpoint-bytes", o.wal_checkpoint_bytes,
                       ">= 0 (0: no bound)");
  }
  if (o.wal_fsync && (o.checkpoint_dir.empty() || !o.wal)) {
    return absl::InvalidArgumentError(
        "--wal-fsync: needs --checkpoint-dir and --wal");
  }
  if (o.discard_unreadable_state && o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--discard-unreadable-state: needs --checkpoint-dir");
  }
  return absl::OkStatus();
}

// A flag in seconds: finite, in [0, most] ((0, most] unless
// `zero_means` says what 0 does).
absl::Status SecondsIn(absl::string_view flag, double value, double most,
                       absl::string_view zero_means = "") {
  const bool above_least = zero_means.empty() ? value > 0.0 : value >= 0.0;
  if (std::isfinite(value) && above_least && value <= most) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "--%s=%g: must be in %s0, %g]%s", flag, value,
      zero_means.empty() ? "(" : "[", most,
      zero_means.empty() ? "" : absl::StrCat(" (0: ", zero_means, ")")));
}

// The flags in seconds.
absl::Status CheckSeconds(const ServerOptions& o) {
  for (const absl::Status& s :
       {SecondsIn("worker-timeout-seconds", o.worker_timeout_seconds, 86400,
                  "never drop a worker"),
        SecondsIn("init-values-timeout-seconds", o.init_values_timeout_seconds,
                  86400),
        SecondsIn("init-preferred-grace-seconds",
                  o.init_preferred_grace_seconds, 3600,
                  "the first caller sends the initial values"),
        SecondsIn("shutdown-grace-seconds", o.shutdown_grace_seconds, 86400,
                  "in-flight calls are cancelled at once")}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ConsistencyMode> ParseConsistencyMode(
    absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty()) return v1::CONSISTENCY_MODE_UNSPECIFIED;
  if (lower == "bsp") return v1::CONSISTENCY_MODE_BSP;
  if (lower == "asp") return v1::CONSISTENCY_MODE_ASP;
  if (lower == "ssp") return v1::CONSISTENCY_MODE_SSP;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--mode=%s: must be bsp, asp, ssp or empty (accept Init's)", name));
}

absl::StatusOr<AsyncPullDeltas> ParseAsyncPullDeltas(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "shared") return AsyncPullDeltas::kShared;
  if (lower == "per-worker") return AsyncPullDeltas::kPerWorker;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--async-pull-deltas=%s: must be shared or per-worker", name));
}

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("--address: must not be empty");
  }
  if (absl::Status s = CheckNumbers(options); !s.ok()) return s;
  if (absl::Status s = ValidateMetricsEndpoint(options.metrics); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateTransportSecurity(options.transport, TransportRole::kServer);
      !s.ok()) {
    return s;
  }
  if (!options.worker_tokens_file.empty()) {
    if (absl::Status s = LoadWorkerTokens(options.worker_tokens_file).status();
        !s.ok()) {
      return s;
    }
  }
  auto mode = ParseConsistencyMode(options.mode);
  if (!mode.ok()) return mode.status();
  if (auto deltas = ParseAsyncPullDeltas(options.async_pull_deltas);
      !deltas.ok()) {
    return deltas.status();
  }
  if (options.staleness != 0 && *mode != v1::CONSISTENCY_MODE_SSP) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--staleness=%d: applies only with --mode=ssp", options.staleness));
  }
  if (options.checkpoint_every != 0 && options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--checkpoint-every=%d: needs --checkpoint-dir",
                        options.checkpoint_every));
  }
  if (absl::Status s = CheckWriteAheadLog(options); !s.ok()) return s;
  return CheckSeconds(options);
}

int64_t PullThreads(const ServerOptions& options) {
  if (options.pull_threads > 0) return options.pull_threads;
  const int64_t per_job =
      options.num_workers * options.max_waiting_pulls_per_worker;
  return std::clamp<int64_t>(per_job, kMinPullThreads, 100000);
}

ShardOptions ToShardOptions(const ServerOptions& options) {
  ShardOptions shard;
  shard.shard_id = static_cast<uint32_t>(options.shard_id);
  shard.num_shards = static_cast<uint32_t>(options.num_shards);
  shard.num_workers = static_cast<uint32_t>(options.num_workers);
  shard.mode = ParseConsistencyMode(options.mode).value();
  shard.staleness = static_cast<uint32_t>(options.staleness);
  shard.max_message_bytes = static_cast<uint64_t>(options.max_message_bytes);
  shard.memory_budget_bytes =
      static_cast<uint64_t>(options.memory_budget_bytes);
  shard.checkpoints = !options.checkpoint_dir.empty();
  shard.memory_limit_bytes =
      options.memory_limit_bytes < 0
          ? DetectMemoryLimitBytes()
          : static_cast<uint64_t>(options.memory_limit_bytes);
  shard.max_chunks = static_cast<uint64_t>(options.max_chunks);
  shard.max_init_overhead_bytes =
      static_cast<uint64_t>(options.max_init_overhead_bytes);
  shard.async_pull_deltas =
      ParseAsyncPullDeltas(options.async_pull_deltas).value();
  shard.async_publish_every =
      static_cast<uint64_t>(options.async_publish_every);
  shard.max_replica_bytes = static_cast<uint64_t>(options.max_replica_bytes);
  shard.init_values_timeout =
      absl::Seconds(options.init_values_timeout_seconds);
  shard.init_preferred_grace =
      absl::Seconds(options.init_preferred_grace_seconds);
  shard.apply_threads = static_cast<int>(options.apply_threads);
  return shard;
}

absl::Duration ShutdownGrace(const ServerOptions& options) {
  return absl::Seconds(options.shutdown_grace_seconds);
}

}  // namespace gradwire
