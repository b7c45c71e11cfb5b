// The Prometheus metrics of one shard. Every family has a `shard` label
// (the shard id); names follow the gradwire_ convention, base units, and
// counters end in _total.
//
// Counted on the request paths (children resolved once, in Create; each
// update is a lock-free atomic operation):
//   gradwire_shard_pushes_total{result}        Push calls by outcome: accepted,
//       duplicate (every chunk already held), or the reason of a refusal:
//       not_initialized, unknown_worker, invalid, not_owned,
//       step_out_of_range, non_finite_update (chunk_updater.h)
//   gradwire_shard_received_bytes_total{rpc}   serialized request sizes of
//   gradwire_shard_sent_bytes_total{rpc}       Push and Pull (rpc="push",
//                                              "pull") and of their replies
//   gradwire_shard_push_stage_seconds_total{stage}  time of Push calls by
//       stage (PushStage): parse, decode, lock_wait, update, journal, respond
//   gradwire_shard_aggregation_seconds         adding one pushed chunk into
//                                              the sum (BSP) or decoding it
//                                              to dense (ASP/SSP)
//   gradwire_shard_optimizer_seconds           one optimizer update of a chunk
//   gradwire_shard_push_staleness_steps        ASP/SSP: how far an applied
//       push's step runs ahead of the chunk's clock (the slowest worker's
//       next step), the gap that SSP bounds with --staleness
//   gradwire_shard_pulled_chunks_total{answer} chunks answered by Pull calls:
//       dense (weights or the shadow), delta (one delta, or an empty one
//       for a worker that is current) or chain (several deltas in order;
//       published_deltas.h). Dense answers after the first pull mean
//       workers fall behind more than the kept publications.
//   gradwire_shard_pull_wait_seconds           per Pull call, the time spent
//                                              waiting for min_step (BSP and
//                                              SSP); 0 when none was needed
//   gradwire_shard_checkpoint_seconds          successful checkpoint writes
//   gradwire_shard_checkpoint_failures_total   failed checkpoint writes
//   gradwire_shard_worker_drops_total          workers taken out of the live
//                                              set (Shard::DropWorker)
//   gradwire_shard_worker_rejoins_total        dropped workers back in it
//   gradwire_shard_kept_deltas_reclaimed_total kept pull deltas dropped to
//                                              make room in the memory budget
//   gradwire_shard_auth_refusals_total{code}   calls refused for their
//       credentials (--auth-token-file): unauthenticated (no bearer token)
//       or permission_denied (a wrong one)
// Computed at scrape time:
//   gradwire_shard_checkpoint_age_seconds      since the last checkpoint this
//                                              process wrote (absent before)
// and, through RegisterShardStateMetrics, the shard's state (shard.h).
//
// Thread safety: every method may be called concurrently.
#ifndef GRADWIRE_SERVER_SHARD_SHARD_METRICS_H_
#define GRADWIRE_SERVER_SHARD_SHARD_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace gradwire {

class Shard;

// How a Push ended; one counter each.
enum class PushOutcome {
  kAccepted,         // at least one chunk applied
  kDuplicate,        // every chunk was already held (a retry)
  kNotInitialized,   // no Init yet
  kUnknownWorker,    // worker id outside the config
  kInvalid,          // malformed: no chunks, a chunk twice, bad encoding
  kNotOwned,         // a chunk this shard does not hold
  kStepOutOfRange,   // the step is not accepted now (consistency rules)
  kNonFiniteUpdate,  // its update would make a weight or state non-finite
  kOverBudget,       // its decoded size would pass the memory budget
};
inline constexpr int kNumPushOutcomes = 9;

// How one pulled chunk was answered; one counter each.
enum class PullAnswer {
  kDense,  // the weights, or the shadow, in full
  kDelta,  // one delta (empty when the worker is current)
  kChain,  // several deltas, added in order
};
inline constexpr int kNumPullAnswers = 3;
inline constexpr const char* kPullAnswerNames[kNumPullAnswers] = {
    "dense", "delta", "chain"};

// Where the time of one Push call goes, stage by stage.
enum class PushStage {
  kParse,     // the service: counting and parsing the received bytes
  kDecode,    // decoding and validating every chunk (no locks)
  kLockWait,  // taking the chunks' locks
  kUpdate,    // judging steps, preparing and applying updates (under locks)
  kJournal,   // appending to the write-ahead log and waiting until durable
  kRespond,   // the service: serializing the reply
};
inline constexpr int kNumPushStages = 6;
// The `stage` label of each PushStage.
inline constexpr const char* kPushStageNames[kNumPushStages] = {
    "parse", "decode", "lock_wait", "update", "journal", "respond"};

// A worker counts as active while its last accepted push is at most this
// old.
inline constexpr absl::Duration kActiveWorkerWindow = absl::Seconds(60);

class ShardMetrics {
 public:
  // Registers the families above in `registry` (which must outlive the
  // result) and resolves the children of `shard_id`. Errors: those of the
  // Registry, e.g. ALREADY_EXISTS when another ShardMetrics of any shard
  // registered the checkpoint age in the same registry.
  static absl::StatusOr<std::unique_ptr<ShardMetrics>> Create(
      metrics::Registry* registry, uint32_t shard_id);

  ShardMetrics(const ShardMetrics&) = delete;
  ShardMetrics& operator=(const ShardMetrics&) = delete;

  void CountPush(PushOutcome outcome) {
    pushes_[static_cast<int>(outcome)]->Increment();
  }
  // Serialized sizes of one call's request and reply (0 for a failed call,
  // which sends no reply message).
  void CountPushBytes(size_t request, size_t reply) {
    push_received_->Increment(static_cast<double>(request));
    push_sent_->Increment(static_cast<double>(reply));
  }
  void CountPulledChunk(PullAnswer answer) {
    pulled_chunks_[static_cast<int>(answer)]->Increment();
  }
  // Chunks answered `answer` so far (tests, benchmarks).
  double PulledChunks(PullAnswer answer) const {
    return pulled_chunks_[static_cast<int>(answer)]->Value();
  }
  void CountPullBytes(size_t request, size_t reply) {
    pull_received_->Increment(static_cast<double>(request));
    pull_sent_->Increment(static_cast<double>(reply));
  }
  // Seconds one Push call spent in `stage`.
  void AddPushStageSeconds(PushStage stage, double seconds) {
    push_stages_[static_cast<int>(stage)]->Increment(seconds);
  }
  // Seconds all Push calls so far spent in `stage` (benchmarks).
  double PushStageSeconds(PushStage stage) const {
    return push_stages_[static_cast<int>(stage)]->Value();
  }
  void ObserveAggregation(double seconds) { aggregation_->Observe(seconds); }
  void ObserveOptimizer(double seconds) { optimizer_->Observe(seconds); }
  void ObserveStaleness(uint64_t steps) {
    staleness_->Observe(static_cast<double>(steps));
  }
  void ObservePullWait(absl::Duration waited) {
    pull_wait_->Observe(absl::ToDoubleSeconds(waited));
  }
  void CountWorkerDrop() { worker_drops_->Increment(); }
  void CountWorkerRejoin() { worker_rejoins_->Increment(); }
  // A call refused by the bearer-token check with `code`:
  // kPermissionDenied (a wrong token), anything else counts as
  // UNAUTHENTICATED (no token).
  void CountAuthRefusal(absl::StatusCode code) {
    (code == absl::StatusCode::kPermissionDenied ? auth_wrong_token_
                                                 : auth_no_token_)
        ->Increment();
  }
  // A checkpoint write that took `duration` and ended at `end`.
  void RecordCheckpoint(bool ok, absl::Duration duration, absl::Time end);
  // A reservation the shard's memory budget refused (memory_budget.h), in
  // gradwire_shard_memory_budget_refusals_total{what}: `what` is the
  // reservation's fixed name ("decoded push", "pull answer", "kept pull
  // delta", ...), with spaces as underscores. Thread-safe.
  void CountMemoryBudgetRefusal(absl::string_view what);
  // Refusals of `what` so far (tests).
  double MemoryBudgetRefusals(absl::string_view what) const;
  // A kept pull delta dropped to make room in the memory budget for
  // another reservation (gradwire_shard_kept_deltas_reclaimed_total).
  void CountKeptDeltaReclaimed() { kept_deltas_reclaimed_->Increment(); }
  // Kept deltas dropped so far (tests).
  double KeptDeltasReclaimed() const { return kept_deltas_reclaimed_->Value(); }

 private:
  ShardMetrics() = default;
  // Each registers its families and resolves the children of `shard`.
  absl::Status AddCounters(metrics::Registry* registry,
                           const std::string& shard);
  // The counters of bytes, checkpoint failures, worker drops and rejoins,
  // and auth refusals (AddCounters ends with them).
  absl::Status AddTrafficCounters(metrics::Registry* registry,
                                  const std::string& shard);
  absl::Status AddHistograms(metrics::Registry* registry,
                             const std::string& shard);
  absl::Status AddCheckpointAge(metrics::Registry* registry,
                                const std::string& shard);

  // Constant after Create; the objects belong to the Registry.
  std::array<metrics::Counter*, kNumPushOutcomes> pushes_{};
  std::array<metrics::Counter*, kNumPushStages> push_stages_{};
  std::array<metrics::Counter*, kNumPullAnswers> pulled_chunks_{};
  metrics::Counter* push_received_ = nullptr;
  metrics::Counter* push_sent_ = nullptr;
  metrics::Counter* pull_received_ = nullptr;
  metrics::Counter* pull_sent_ = nullptr;
  metrics::Histogram* aggregation_ = nullptr;
  metrics::Histogram* optimizer_ = nullptr;
  metrics::Histogram* staleness_ = nullptr;
  metrics::Histogram* pull_wait_ = nullptr;
  metrics::Histogram* checkpoint_duration_ = nullptr;
  metrics::Counter* checkpoint_failures_ = nullptr;
  metrics::Counter* worker_drops_ = nullptr;
  metrics::Counter* worker_rejoins_ = nullptr;
  metrics::Counter* auth_no_token_ = nullptr;
  metrics::Counter* auth_wrong_token_ = nullptr;
  metrics::Counter* kept_deltas_reclaimed_ = nullptr;
  std::unique_ptr<metrics::CallbackRegistration> checkpoint_age_;
  metrics::Family<metrics::Counter>* budget_refusals_ = nullptr;
  std::string shard_label_;

  // Unix nanoseconds of the last successful checkpoint; 0 before one.
  std::atomic<int64_t> last_checkpoint_nanos_{0};
};

// Times consecutive stages of one Push call: each Lap adds the time since
// the previous Lap (or construction) to a stage.
class PushStageClock {
 public:
  explicit PushStageClock(ShardMetrics* metrics)
      : metrics_(metrics), last_(std::chrono::steady_clock::now()) {}
  void Lap(PushStage stage) {
    const auto now = std::chrono::steady_clock::now();
    metrics_->AddPushStageSeconds(
        stage, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  ShardMetrics* metrics_;
  std::chrono::steady_clock::time_point last_;
};

// Registers scrape-time gauges of `shard`'s state, each with the shard
// label:
//   gradwire_shard_initialized          1 after Init (or a restore), else 0
//   gradwire_shard_chunks               chunks held
//   gradwire_shard_chunk_version_min    fewest / most optimizer updates of
//   gradwire_shard_chunk_version_max    any chunk (one pair, not one series
//                                       per chunk, to bound cardinality)
//   gradwire_shard_chunk_clock_min      steps every worker has completed, on
//                                       the slowest chunk
//   gradwire_shard_workers              workers in the config
//   gradwire_shard_active_workers       workers with an accepted push in the
//                                       last kActiveWorkerWindow
//   gradwire_shard_live_workers         workers in the live set (shard.h)
//   gradwire_shard_worker_replica_bytes bytes of ASP/SSP per-worker pull
//                                       replicas (worker_replicas.h)
//   gradwire_shard_memory_budget_used_bytes   bytes reserved in the shard's
//   gradwire_shard_memory_budget_limit_bytes  memory budget, and its size
//                                       (--memory-budget-bytes), also
//                                       before Init
// All but the first and the budget's are absent before Init. `shard` and
// `registry` must outlive the returned registrations.
absl::StatusOr<std::vector<std::unique_ptr<metrics::CallbackRegistration>>>
RegisterShardStateMetrics(metrics::Registry* registry, const Shard* shard);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SHARD_METRICS_H_
