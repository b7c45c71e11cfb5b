#include "server/shard/shard_metrics.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "server/shard/shard.h"

namespace gradwire {
namespace {

using metrics::CallbackSink;
using metrics::Labels;
using metrics::MetricType;

constexpr const char* kPushOutcomeNames[kNumPushOutcomes] = {
    "accepted",          "duplicate",         "not_initialized",
    "unknown_worker",    "invalid",           "not_owned",
    "step_out_of_range", "non_finite_update", "over_budget"};

// Bucket layouts. Per-chunk work spans microseconds (small chunks) to
// seconds (4 MiB chunks through Adam on a busy machine); a pull may wait up
// to a minute (kMaxPullWait); SSP staleness is bounded by the 64-step
// window of common/consistency/worker_progress.h.
std::vector<double> ChunkWorkBuckets() {
  return metrics::ExponentialBuckets(1e-5, 4, 10);  // 10 us .. 2.6 s
}
std::vector<double> PullWaitBuckets() {
  return metrics::ExponentialBuckets(1e-3, 4, 9);  // 1 ms .. 65 s
}
std::vector<double> StalenessBuckets() { return {0, 1, 2, 4, 8, 16, 32, 64}; }
std::vector<double> CheckpointBuckets() {
  return metrics::ExponentialBuckets(1e-2, 4, 8);  // 10 ms .. 164 s
}

// The child `labels` of counter family `name`.
absl::StatusOr<metrics::Counter*> CounterChild(metrics::Registry* registry,
                                               const char* name,
                                               const char* help,
                                               const Labels& labels) {
  auto family = registry->AddCounterFamily({name, help});
  if (!family.ok()) return family.status();
  return (*family)->TryAdd(labels);
}

// The child `labels` of histogram family `name`.
absl::StatusOr<metrics::Histogram*> HistogramChild(metrics::Registry* registry,
                                                   const char* name,
                                                   const char* help,
                                                   std::vector<double> bounds,
                                                   const Labels& labels) {
  auto family = registry->AddHistogramFamily({name, help}, std::move(bounds));
  if (!family.ok()) return family.status();
  return (*family)->TryAdd(labels);
}

// *out = *child, or child's error.
template <typename T>
absl::Status Assign(absl::StatusOr<T*> child, T** out) {
  if (!child.ok()) return child.status();
  *out = *child;
  return absl::OkStatus();
}

absl::Status FirstError(std::initializer_list<absl::Status> statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Assigns children[i] the child of counter family `name` labelled with
// the shard and `key` = names[i], for every i; the first error ends it.
template <typename Names, size_t kCount>
absl::Status AssignEach(metrics::Registry* registry, const char* name,
                        const char* help, const std::string& shard,
                        const char* key, const Names& names,
                        std::array<metrics::Counter*, kCount>& children) {
  for (size_t i = 0; i < kCount; ++i) {
    if (absl::Status s =
            Assign(CounterChild(registry, name, help,
                                {{"shard", shard}, {key, names[i]}}),
                   &children[i]);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardMetrics>> ShardMetrics::Create(
    metrics::Registry* registry, uint32_t shard_id) {
  std::unique_ptr<ShardMetrics> created(new ShardMetrics());
  const std::string shard = absl::StrCat(shard_id);
  if (absl::Status s = FirstError({created->AddCounters(registry, shard),
                                   created->AddHistograms(registry, shard),
                                   created->AddCheckpointAge(registry, shard)});
      !s.ok()) {
    return s;
  }
  return created;
}

absl::Status ShardMetrics::AddCounters(metrics::Registry* registry,
                                       const std::string& shard) {
  auto refusals = registry->AddCounterFamily(
      {"gradwire_shard_memory_budget_refusals_total",
       "Reservations the shard's memory budget (--memory-budget-bytes) "
       "refused, by what was refused."});
  if (!refusals.ok()) return refusals.status();
  budget_refusals_ = *refusals;
  shard_label_ = shard;
  if (absl::Status s = FirstError({
          AssignEach(registry, "gradwire_shard_pushes_total",
                     "Push calls by result: accepted, duplicate, or the "
                     "reason of a refusal.",
                     shard, "result", kPushOutcomeNames, pushes_),
          AssignEach(registry, "gradwire_shard_push_stage_seconds_total",
                     "Time Push calls spent in each stage: parse, decode, "
                     "lock_wait, update, journal, respond.",
                     shard, "stage", kPushStageNames, push_stages_),
          AssignEach(registry, "gradwire_shard_pulled_chunks_total",
                     "Chunks answered by Pull calls: dense, delta (one, or "
                     "empty for a current worker) or chain (several deltas "
                     "in order).",
                     shard, "answer", kPullAnswerNames, pulled_chunks_),
      });
      !s.ok()) {
    return s;
  }
  return AddTrafficCounters(registry, shard);
}

absl::Status ShardMetrics::AddTrafficCounters(metrics::Registry* registry,
                                              const std::string& shard) {
  constexpr const char* kReceived = "gradwire_shard_received_bytes_total";
  constexpr const char* kReceivedHelp =
      "Serialized size of the Push and Pull requests received, in bytes.";
  constexpr const char* kSent = "gradwire_shard_sent_bytes_total";
  constexpr const char* kSentHelp =
      "Serialized size of the Push and Pull replies sent, in bytes.";
  constexpr const char* kAuth = "gradwire_shard_auth_refusals_total";
  constexpr const char* kAuthHelp =
      "Calls refused for their credentials: unauthenticated (no bearer "
      "token) or permission_denied (a wrong one).";
  const Labels push = {{"shard", shard}, {"rpc", "push"}};
  const Labels pull = {{"shard", shard}, {"rpc", "pull"}};
  return FirstError({
      Assign(CounterChild(registry, kReceived, kReceivedHelp, push),
             &push_received_),
      Assign(CounterChild(registry, kReceived, kReceivedHelp, pull),
             &pull_received_),
      Assign(CounterChild(registry, kSent, kSentHelp, push), &push_sent_),
      Assign(CounterChild(registry, kSent, kSentHelp, pull), &pull_sent_),
      Assign(CounterChild(registry, "gradwire_shard_checkpoint_failures_total",
                          "Checkpoint writes that failed.", {{"shard", shard}}),
             &checkpoint_failures_),
      Assign(CounterChild(registry, "gradwire_shard_worker_drops_total",
                          "Workers dropped from the live set after "
                          "--worker-timeout-seconds of silence.",
                          {{"shard", shard}}),
             &worker_drops_),
      Assign(CounterChild(registry, "gradwire_shard_worker_rejoins_total",
                          "Dropped workers back in the live set (by Init or "
                          "a push of a step not yet completed).",
                          {{"shard", shard}}),
             &worker_rejoins_),
      Assign(
          CounterChild(registry, "gradwire_shard_kept_deltas_reclaimed_total",
                       "Kept pull deltas dropped to make room in the "
                       "memory budget (--memory-budget-bytes) for another "
                       "reservation.",
                       {{"shard", shard}}),
          &kept_deltas_reclaimed_),
      Assign(CounterChild(registry, kAuth, kAuthHelp,
                          {{"shard", shard}, {"code", "unauthenticated"}}),
             &auth_no_token_),
      Assign(CounterChild(registry, kAuth, kAuthHelp,
                          {{"shard", shard}, {"code", "permission_denied"}}),
             &auth_wrong_token_),
  });
}

absl::Status ShardMetrics::AddHistograms(metrics::Registry* registry,
                                         const std::string& shard) {
  const Labels labels = {{"shard", shard}};
  return FirstError({
      Assign(HistogramChild(registry, "gradwire_shard_aggregation_seconds",
                            "Time to add one pushed chunk into the step's "
                            "sum (BSP) or decode it (ASP, SSP).",
                            ChunkWorkBuckets(), labels),
             &aggregation_),
      Assign(HistogramChild(registry, "gradwire_shard_optimizer_seconds",
                            "Time of one optimizer update of one chunk.",
                            ChunkWorkBuckets(), labels),
             &optimizer_),
      Assign(HistogramChild(registry, "gradwire_shard_push_staleness_steps",
                            "ASP/SSP: steps an applied push runs ahead of "
                            "the chunk's clock (the slowest worker).",
                            StalenessBuckets(), labels),
             &staleness_),
      Assign(HistogramChild(registry, "gradwire_shard_pull_wait_seconds",
                            "Time one Pull call waited for its min_step.",
                            PullWaitBuckets(), labels),
             &pull_wait_),
      Assign(HistogramChild(registry, "gradwire_shard_checkpoint_seconds",
                            "Duration of successful checkpoint writes.",
                            CheckpointBuckets(), labels),
             &checkpoint_duration_),
  });
}

absl::Status ShardMetrics::AddCheckpointAge(metrics::Registry* registry,
                                            const std::string& shard) {
  auto age = registry->AddCallback(
      MetricType::kGauge,
      {"gradwire_shard_checkpoint_age_seconds",
       "Seconds since this process last wrote a checkpoint."},
      [this, labels = Labels{{"shard", shard}}](CallbackSink& sink) {
        const int64_t last =
            last_checkpoint_nanos_.load(std::memory_order_relaxed);
        if (last == 0) return;
        sink.Add(labels, (absl::GetCurrentTimeNanos() - last) / 1e9);
      });
  if (!age.ok()) return age.status();
  checkpoint_age_ = *std::move(age);
  return absl::OkStatus();
}

void ShardMetrics::RecordCheckpoint(bool ok, absl::Duration duration,
                                    absl::Time end) {
  if (!ok) {
    checkpoint_failures_->Increment();
    return;
  }
  checkpoint_duration_->Observe(absl::ToDoubleSeconds(duration));
  last_checkpoint_nanos_.store(absl::ToUnixNanos(end),
                               std::memory_order_relaxed);
}

namespace {

// One scrape-time gauge of the shard; `value` returns false for "absent".
using StateGauge = std::function<bool(const Shard&, double*)>;

struct StateGaugeSpec {
  const char* name;
  const char* help;
  StateGauge value;
};

// The uint64 fields of Shard::Info as gauges, present after Init.
StateGauge InfoField(uint64_t (v1::ShardInfo::*field)() const) {
  return [field](const Shard& shard, double* out) {
    const v1::ShardInfo info = shard.Info();
    *out = static_cast<double>((info.*field)());
    return info.initialized();
  };
}

std::vector<StateGaugeSpec> StateGauges() {
  return {
      {"gradwire_shard_initialized",
       "1 once the shard holds its chunks (Init or a restore), else 0.",
       [](const Shard& shard, double* out) {
         *out = shard.initialized() ? 1 : 0;
         return true;
       }},
      {"gradwire_shard_chunks", "Chunks this shard holds.",
       InfoField(&v1::ShardInfo::num_chunks)},
      {"gradwire_shard_chunk_version_min",
       "Fewest optimizer updates applied to any chunk.",
       InfoField(&v1::ShardInfo::min_version)},
      {"gradwire_shard_chunk_version_max",
       "Most optimizer updates applied to any chunk.",
       InfoField(&v1::ShardInfo::max_version)},
      {"gradwire_shard_chunk_clock_min",
       "Steps every worker has completed, on the slowest chunk.",
       InfoField(&v1::ShardInfo::min_clock)},
      {"gradwire_shard_workers", "Workers of the training config.",
       [](const Shard& shard, double* out) {
         *out = shard.num_workers();
         return shard.initialized();
       }},
      {"gradwire_shard_active_workers",
       "Workers whose last accepted push is at most 60 s old.",
       [](const Shard& shard, double* out) {
         *out = shard.ActiveWorkers(absl::Now(), kActiveWorkerWindow);
         return shard.initialized();
       }},
      {"gradwire_shard_live_workers",
       "Workers in the live set: those a BSP step waits for.",
       [](const Shard& shard, double* out) {
         *out = shard.LiveWorkers();
         return shard.initialized();
       }},
      {"gradwire_shard_memory_budget_used_bytes",
       "Bytes reserved in the shard's memory budget: decoded pushes, pull "
       "answers being built and kept pull deltas.",
       [](const Shard& shard, double* out) {
         *out = static_cast<double>(shard.memory_budget().used());
         return true;
       }},
      {"gradwire_shard_memory_budget_limit_bytes",
       "Size of the shard's memory budget (--memory-budget-bytes).",
       [](const Shard& shard, double* out) {
         *out = static_cast<double>(shard.memory_budget().limit());
         return true;
       }},
      {"gradwire_shard_worker_replica_bytes",
       "Bytes of per-worker replicas kept for ASP/SSP pull deltas.",
       [](const Shard& shard, double* out) {
         *out = static_cast<double>(shard.replica_bytes());
         return shard.initialized();
       }},
  };
}

}  // namespace

void ShardMetrics::CountMemoryBudgetRefusal(absl::string_view what) {
  budget_refusals_
      ->Add({{"shard", shard_label_},
             {"what", absl::StrReplaceAll(what, {{" ", "_"}})}})
      .Increment();
}

double ShardMetrics::MemoryBudgetRefusals(absl::string_view what) const {
  return budget_refusals_
      ->Add({{"shard", shard_label_},
             {"what", absl::StrReplaceAll(what, {{" ", "_"}})}})
      .Value();
}

absl::StatusOr<std::vector<std::unique_ptr<metrics::CallbackRegistration>>>
RegisterShardStateMetrics(metrics::Registry* registry, const Shard* shard) {
  const Labels labels = {{"shard", absl::StrCat(shard->shard_id())}};
  std::vector<std::unique_ptr<metrics::CallbackRegistration>> registrations;
  for (StateGaugeSpec& spec : StateGauges()) {
    auto registration = registry->AddCallback(
        MetricType::kGauge, {spec.name, spec.help},
        [shard, labels, value = std::move(spec.value)](CallbackSink& sink) {
          double sample = 0;
          if (value(*shard, &sample)) sink.Add(labels, sample);
        });
    if (!registration.ok()) return registration.status();
    registrations.push_back(*std::move(registration));
  }
  return registrations;
}

}  // namespace gradwire
