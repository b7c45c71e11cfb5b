// A shard's byte budget for the large buffers that the gRPC ResourceQuota
// (--memory-quota-bytes) does not see: decoded pushes, pull answers being
// built and the published pull deltas each chunk keeps (shard.h). Every such
// buffer is reserved before it is allocated; a reservation past the budget
// is refused with RESOURCE_EXHAUSTED and nothing is allocated, so a burst of
// large requests degrades into refusals the workers retry instead of an
// out-of-memory kill of the whole shard.
//
// The budget counts bytes that callers promise to hold, not what the
// allocator hands out: each caller reserves an upper estimate of what it is
// about to allocate and keeps the MemoryLease as long as the buffer lives.
//
// Thread safety: MemoryBudget is safe to use from any number of threads
// (one atomic counter, no lock). A MemoryLease is a value owned by one
// thread at a time, like any other object.
#ifndef GRADWIRE_SERVER_SHARD_MEMORY_BUDGET_H_
#define GRADWIRE_SERVER_SHARD_MEMORY_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {

class MemoryBudget;

// Bytes held against a MemoryBudget, given back on destruction (or by
// Release). Move-only; a moved-from or default-constructed lease holds
// nothing. The budget must outlive every lease it granted.
class MemoryLease {
 public:
  MemoryLease() = default;
  ~MemoryLease() { Release(); }
  MemoryLease(MemoryLease&& other) noexcept;
  MemoryLease& operator=(MemoryLease&& other) noexcept;
  MemoryLease(const MemoryLease&) = delete;
  MemoryLease& operator=(const MemoryLease&) = delete;

  // Bytes held now.
  uint64_t bytes() const { return bytes_; }

  // Holds `more` bytes more, under the same rule as MemoryBudget::Reserve
  // (the error names `what`); on an error the lease is unchanged. A lease
  // that holds nothing and has no budget is FAILED_PRECONDITION.
  absl::Status Grow(uint64_t more, absl::string_view what);
  // Gives back min(`fewer`, bytes()) bytes.
  void Shrink(uint64_t fewer);
  // Gives every byte back; the lease then holds nothing.
  void Release();

 private:
  friend class MemoryBudget;
  MemoryLease(MemoryBudget* budget, uint64_t bytes)
      : budget_(budget), bytes_(bytes) {}

  MemoryBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

class MemoryBudget {
 public:
  // Called with the `what` of each refused reservation (for a metric); may
  // run on any thread, concurrently, and must not reserve.
  using RefusalObserver = std::function<void(absl::string_view what)>;

  // Called when a reservation of `needed` more bytes than are free would
  // be refused: it may release reclaimable leases (a shard's kept pull
  // deltas) and returns the bytes it released. It runs on the reserving
  // thread, possibly with that thread's locks held, so it must not block on
  // a lock that a reserving thread may hold, and must not reserve.
  using Reclaimer = std::function<uint64_t(uint64_t needed)>;

  // A budget of `limit` bytes (the server's --memory-budget-bytes).
  explicit MemoryBudget(uint64_t limit, RefusalObserver on_refusal = nullptr)
      : limit_(limit), on_refusal_(std::move(on_refusal)) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Sets what a refusal first asks to make room; set it before the budget
  // is shared between threads.
  void set_reclaimer(Reclaimer reclaimer) { reclaimer_ = std::move(reclaimer); }

  // Holds `bytes` until the returned lease is destroyed or released. When
  // used() + bytes would exceed limit(), the reclaimer (if any) is asked to
  // make room and the reservation is tried once more; RESOURCE_EXHAUSTED,
  // with nothing held, when it still does not fit. The message names
  // `what` (e.g. "pull answer"), the bytes, the use and the limit, and
  // --memory-budget-bytes. Reserving 0 bytes always succeeds.
  absl::StatusOr<MemoryLease> Reserve(uint64_t bytes, absl::string_view what);

  // Bytes held by all leases now; a moment's value under concurrency.
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  friend class MemoryLease;
  // Adds `bytes` to used_ unless that would pass limit_, asking the
  // reclaimer for room once.
  absl::Status Take(uint64_t bytes, absl::string_view what);
  // Adds `bytes` to used_ if that stays within limit_; else false, with
  // *used the use it saw.
  bool TryTake(uint64_t bytes, uint64_t* used);
  void Give(uint64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  const uint64_t limit_;
  const RefusalObserver on_refusal_;
  Reclaimer reclaimer_;
  std::atomic<uint64_t> used_{0};
};

// Thread-local scratch buffers keep their largest capacity for the
// thread's lifetime; one huge request would pin that much memory on every
// thread that ever served one. After a use, a scratch vector whose capacity
// exceeds kRetainedScratchBytes is freed (to be allocated again at the next
// use): the common case, chunks of at most the default 4 MiB partition,
// keeps its buffers.
inline constexpr size_t kRetainedScratchBytes = size_t{4} << 20;

template <typename T>
void TrimScratch(std::vector<T>* scratch) {
  if (scratch->capacity() * sizeof(T) > kRetainedScratchBytes) {
    std::vector<T>().swap(*scratch);
  }
}

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_MEMORY_BUDGET_H_
