// The workers a chunk waits for: all of them after Init or a restore, fewer
// once the shard drops a worker it considers gone (Shard::DropWorker).
//
// A BSP step completes when every live worker has pushed it; an ASP/SSP
// clock is the slowest live worker's. The set is per chunk because each chunk
// is locked on its own; the shard keeps them equal.
//
// Thread safety: none; the owner guards it (the shard: the chunk's mutex).
#ifndef GRADWIRE_COMMON_CONSISTENCY_LIVE_SET_H_
#define GRADWIRE_COMMON_CONSISTENCY_LIVE_SET_H_

#include <cstdint>
#include <vector>

namespace gradwire {

class LiveSet {
 public:
  // Every one of `num_workers` workers live.
  explicit LiveSet(uint32_t num_workers) : dropped_(num_workers, false) {}

  // Workers in the set plus those dropped from it (the config's count).
  uint32_t num_workers() const {
    return static_cast<uint32_t>(dropped_.size());
  }
  uint32_t num_dropped() const { return num_dropped_; }

  // Precondition for both: worker < num_workers().
  bool IsLive(uint32_t worker) const { return !dropped_[worker]; }

  // Takes `worker` out; whether it was live.
  bool Drop(uint32_t worker) {
    if (dropped_[worker]) return false;
    dropped_[worker] = true;
    ++num_dropped_;
    return true;
  }

  // The workers dropped, ascending.
  std::vector<uint32_t> Dropped() const {
    std::vector<uint32_t> dropped;
    for (uint32_t w = 0; w < dropped_.size(); ++w) {
      if (dropped_[w]) dropped.push_back(w);
    }
    return dropped;
  }

  // Puts `worker` back; whether it was out.
  bool Rejoin(uint32_t worker) {
    if (!dropped_[worker]) return false;
    dropped_[worker] = false;
    --num_dropped_;
    return true;
  }

 private:
  std::vector<bool> dropped_;
  uint32_t num_dropped_ = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_LIVE_SET_H_
