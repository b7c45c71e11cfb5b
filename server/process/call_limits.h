// Per-key caps on the calls a shard holds at once: the calls of one
// connection (keyed by its peer address) and the Pulls of one worker
// (keyed by its id). A key past its cap has its next call refused at once,
// so that one client cannot take the queue or the pull threads that every
// other client shares.
//
//   CallLimits<std::string> per_connection(64);
//   if (!per_connection.TryAcquire(peer)) { /* RESOURCE_EXHAUSTED */ }
//   ...                                    // the call runs
//   per_connection.Release(peer);
//
// A key's entry exists only while it holds calls, so the map is bounded
// by the calls in flight, not by every key ever seen.
//
// Thread safety: every method may be called concurrently.
#ifndef GRADWIRE_SERVER_PROCESS_CALL_LIMITS_H_
#define GRADWIRE_SERVER_PROCESS_CALL_LIMITS_H_

#include <algorithm>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

template <typename Key>
class CallLimits {
 public:
  // Each key may hold at most `cap` (>= 1) calls at once.
  explicit CallLimits(int64_t cap) : cap_(std::max<int64_t>(1, cap)) {}

  // Takes one of `key`'s places and returns true, or returns false (and
  // takes nothing) when it holds `cap` calls already.
  bool TryAcquire(const Key& key) {
    absl::MutexLock lock(&mu_);
    int64_t& held = held_[key];
    if (held >= cap_) return false;
    ++held;
    return true;
  }

  // Gives back one place taken by TryAcquire.
  void Release(const Key& key) {
    absl::MutexLock lock(&mu_);
    const auto it = held_.find(key);
    if (it == held_.end()) return;
    if (--it->second <= 0) held_.erase(it);
  }

  // Calls `key` holds now.
  int64_t held(const Key& key) const {
    absl::MutexLock lock(&mu_);
    const auto it = held_.find(key);
    return it == held_.end() ? 0 : it->second;
  }

  int64_t cap() const { return cap_; }

 private:
  const int64_t cap_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, int64_t> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_CALL_LIMITS_H_
