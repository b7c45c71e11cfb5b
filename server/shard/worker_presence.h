// Per worker id, what the shard knows of each worker outside any chunk's
// lock: when its last accepted or duplicate push arrived (for
// Shard::ActiveWorkers and the active-workers gauge), whether it is in the
// live set (a summary of the chunks' live sets, for Shard::IsLive and the
// live-workers gauge), and whether it rejoined by Init and has had no push
// applied since (an Init revives a dropped worker once; shard.h).
// Internal to server/shard/.
//
// Thread safety: every method may be called concurrently; entries are
// relaxed atomics, so readers see each entry's latest value but no order
// between entries (good enough for metrics and the liveness watchdog).
#ifndef GRADWIRE_SERVER_SHARD_WORKER_PRESENCE_H_
#define GRADWIRE_SERVER_SHARD_WORKER_PRESENCE_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace gradwire {

class WorkerPresence {
 public:
  // `num_workers` workers, none heard from yet, all live.
  explicit WorkerPresence(uint32_t num_workers)
      : num_workers_(num_workers),
        last_push_nanos_(std::make_unique<std::atomic<int64_t>[]>(num_workers)),
        live_(std::make_unique<std::atomic<bool>[]>(num_workers)),
        revived_by_init_(std::make_unique<std::atomic<bool>[]>(num_workers)) {
    for (uint32_t w = 0; w < num_workers; ++w) {
      last_push_nanos_[w].store(0, std::memory_order_relaxed);
      live_[w].store(true, std::memory_order_relaxed);
      revived_by_init_[w].store(false, std::memory_order_relaxed);
    }
  }

  // Preconditions of all below: worker < num_workers.
  // A push of `worker` was accepted at Unix time `nanos`.
  void HeardPush(uint32_t worker, int64_t nanos) {
    last_push_nanos_[worker].store(nanos, std::memory_order_relaxed);
  }
  void SetLive(uint32_t worker, bool live) {
    live_[worker].store(live, std::memory_order_relaxed);
  }
  bool IsLive(uint32_t worker) const {
    return live_[worker].load(std::memory_order_relaxed);
  }

  // `worker` rejoined by Init (true), or had a push applied (false).
  void SetRevivedByInit(uint32_t worker, bool revived) {
    revived_by_init_[worker].store(revived, std::memory_order_relaxed);
  }
  // Whether it rejoined by Init and has had no push applied since.
  bool RevivedByInit(uint32_t worker) const {
    return revived_by_init_[worker].load(std::memory_order_relaxed);
  }

  // Workers in the live set.
  uint32_t LiveCount() const {
    uint32_t live = 0;
    for (uint32_t w = 0; w < num_workers_; ++w) {
      if (IsLive(w)) ++live;
    }
    return live;
  }

  // Workers whose last push arrived at or after Unix time `since_nanos`.
  uint32_t PushedSince(int64_t since_nanos) const {
    uint32_t active = 0;
    for (uint32_t w = 0; w < num_workers_; ++w) {
      const int64_t last = last_push_nanos_[w].load(std::memory_order_relaxed);
      if (last != 0 && last >= since_nanos) ++active;
    }
    return active;
  }

 private:
  const uint32_t num_workers_;
  // Unix nanoseconds of the last accepted or duplicate push (0: none yet).
  const std::unique_ptr<std::atomic<int64_t>[]> last_push_nanos_;
  const std::unique_ptr<std::atomic<bool>[]> live_;
  const std::unique_ptr<std::atomic<bool>[]> revived_by_init_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_WORKER_PRESENCE_H_
