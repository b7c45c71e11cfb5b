#include "server/shard/worker_liveness.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "server/shard/stderr_log.h"

namespace gradwire {

void WorkerActivity::Heard(uint32_t worker, absl::Time now) {
  if (worker >= kMaxTrackedWorkers) return;
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = last_heard_.try_emplace(worker, now);
  if (!inserted) it->second = std::max(it->second, now);
}

void WorkerActivity::HeardFirst(uint32_t worker, absl::Time now) {
  if (worker >= kMaxTrackedWorkers) return;
  absl::MutexLock lock(&mu_);
  last_heard_.try_emplace(worker, now);
}

absl::Duration WorkerActivity::SilentFor(uint32_t worker, absl::Time baseline,
                                         absl::Time now) const {
  absl::Time since = baseline;
  {
    absl::MutexLock lock(&mu_);
    const auto it = last_heard_.find(worker);
    if (it != last_heard_.end()) since = std::max(since, it->second);
  }
  return std::max(absl::ZeroDuration(), now - since);
}

absl::Duration LivenessWatchdog::PeriodFor(absl::Duration timeout) {
  return std::clamp(timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
}

LivenessWatchdog::LivenessWatchdog(Shard* shard, const WorkerActivity* activity,
                                   absl::Duration timeout)
    : LivenessWatchdog(shard, activity, timeout, /*start_thread=*/true) {}

LivenessWatchdog::LivenessWatchdog(Shard* shard, const WorkerActivity* activity,
                                   absl::Duration timeout, bool start_thread)
    : shard_(shard), activity_(activity), timeout_(timeout) {
  if (start_thread) thread_ = std::thread([this] { Run(); });
}

std::unique_ptr<LivenessWatchdog> LivenessWatchdog::Manual(
    Shard* shard, const WorkerActivity* activity, absl::Duration timeout) {
  return std::unique_ptr<LivenessWatchdog>(
      new LivenessWatchdog(shard, activity, timeout, /*start_thread=*/false));
}

LivenessWatchdog::~LivenessWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void LivenessWatchdog::Run() {
  const absl::Duration period = PeriodFor(timeout_);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_;
      };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), period)) return;
    }
    CheckOnce(absl::Now());
  }
}

int LivenessWatchdog::CheckOnce(absl::Time now) {
  if (!shard_->initialized()) return 0;
  absl::Time baseline;
  {
    absl::MutexLock lock(&mu_);
    if (baseline_ == absl::InfiniteFuture()) baseline_ = now;
    baseline = baseline_;
  }
  int dropped = 0;
  const uint32_t workers = shard_->num_workers();
  for (uint32_t w = 0; w < workers; ++w) {
    if (!shard_->IsLive(w)) continue;
    const absl::Duration silent = activity_->SilentFor(w, baseline, now);
    if (silent <= timeout_) continue;
    // The step it held up, for the log line: the slowest chunk's clock.
    const uint64_t step = shard_->Info().min_clock();
    if (absl::Status s = shard_->DropWorker(w); !s.ok()) {
      LogShardEventf(shard_->shard_id(), "cannot drop worker %d: %s", w,
                     s.ToString());
      continue;
    }
    ++dropped;
    LogShardEventf(
        shard_->shard_id(),
        "worker %d dropped from the live set at step %d: silent "
        "for %s (--worker-timeout-seconds=%g); %d of %d workers "
        "live",
        w, step,
        absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
        absl::ToDoubleSeconds(timeout_), shard_->LiveWorkers(), workers);
  }
  return dropped;
}

}  // namespace gradwire
