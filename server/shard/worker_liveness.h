// Which workers a shard still hears from, and the watchdog that drops the
// silent ones from its live set (Shard::DropWorker, shard.h).
//
// WorkerActivity is fed by the gRPC service with progress only, never with
// a call that anyone could repeat to keep a worker alive:
//   - a Push that the shard applied (a re-sent one, answered as a duplicate,
//     is not progress);
//   - a Pull while it waits on steps its worker has already pushed
//     (Shard::PullWaitsOnOthers): the worker is blocked on the slowest one,
//     not silent; a Pull that waits for a step its own worker has not
//     pushed, or that is answered at once, is not progress;
//   - an Init that puts the worker into the live set (a join or a rejoin,
//     Shard::Init), and the first Init of a worker never heard from; a
//     re-sent Init of a live worker is not progress.
// It reads no clock itself: callers pass `now`.
//
// LivenessWatchdog runs one thread that, every `period`, asks the activity
// which live workers were silent for longer than `timeout` and drops each
// with Shard::DropWorker, logging one line per drop. The time before a
// worker's first call counts from the moment the watchdog first saw the
// shard initialised, so a worker that never shows up is dropped too; it
// rejoins with its Init.
//
// Thread safety: all methods of both classes are safe to call concurrently.
#ifndef GRADWIRE_SERVER_SHARD_WORKER_LIVENESS_H_
#define GRADWIRE_SERVER_SHARD_WORKER_LIVENESS_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/shard/shard.h"

namespace gradwire {

// Worker ids above this are not tracked (the server's --num-workers limit).
inline constexpr uint32_t kMaxTrackedWorkers = 65536;

class WorkerActivity {
 public:
  // `worker` made progress at `now` (see above).
  void Heard(uint32_t worker, absl::Time now);
  // `worker` called at `now`; it counts only when nothing was heard from it
  // before (its first Init).
  void HeardFirst(uint32_t worker, absl::Time now);

  // How long `worker` has been silent at `now`: the time since its last
  // progress, or since `baseline` when that is later (or when it was never
  // heard from).
  absl::Duration SilentFor(uint32_t worker, absl::Time baseline,
                           absl::Time now) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, absl::Time> last_heard_ ABSL_GUARDED_BY(mu_);
};

class LivenessWatchdog {
 public:
  // How often a watchdog with `timeout` looks: a quarter of it, between
  // 10 ms and 1 s, so a silent worker is dropped within 1.25 timeouts.
  static absl::Duration PeriodFor(absl::Duration timeout);

  // Starts the thread. `shard` and `activity` are not owned and must
  // outlive the watchdog; `timeout` > 0.
  LivenessWatchdog(Shard* shard, const WorkerActivity* activity,
                   absl::Duration timeout);
  // Stops and joins the thread; no drop happens after it returns.
  ~LivenessWatchdog();
  LivenessWatchdog(const LivenessWatchdog&) = delete;
  LivenessWatchdog& operator=(const LivenessWatchdog&) = delete;

  // One look at `now`: drops every live worker silent for longer than the
  // timeout; returns how many it dropped. The thread calls it every period;
  // tests call it on a watchdog made by Manual, with times of their own.
  int CheckOnce(absl::Time now);

  // A watchdog without a thread, for tests that drive CheckOnce.
  static std::unique_ptr<LivenessWatchdog> Manual(
      Shard* shard, const WorkerActivity* activity, absl::Duration timeout);

 private:
  LivenessWatchdog(Shard* shard, const WorkerActivity* activity,
                   absl::Duration timeout, bool start_thread);
  void Run();

  Shard* const shard_;
  const WorkerActivity* const activity_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When the shard was first seen initialised; InfiniteFuture before.
  absl::Time baseline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread thread_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_WORKER_LIVENESS_H_
