#include "server/shard/memory_budget.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/retry_metadata.h"

namespace gradwire {

MemoryLease::MemoryLease(MemoryLease&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryLease& MemoryLease::operator=(MemoryLease&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::Status MemoryLease::Grow(uint64_t more, absl::string_view what) {
  if (budget_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the lease belongs to no memory budget", what));
  }
  if (absl::Status s = budget_->Take(more, what); !s.ok()) return s;
  bytes_ += more;
  return absl::OkStatus();
}

void MemoryLease::Shrink(uint64_t fewer) {
  if (fewer > bytes_) fewer = bytes_;
  if (budget_ != nullptr && fewer > 0) budget_->Give(fewer);
  bytes_ -= fewer;
}

void MemoryLease::Release() { Shrink(bytes_); }

absl::StatusOr<MemoryLease> MemoryBudget::Reserve(uint64_t bytes,
                                                  absl::string_view what) {
  if (absl::Status s = Take(bytes, what); !s.ok()) return s;
  return MemoryLease(this, bytes);
}

bool MemoryBudget::TryTake(uint64_t bytes, uint64_t* used) {
  *used = used_.load(std::memory_order_relaxed);
  // A compare-and-swap loop, so that two reservations that each fit alone
  // cannot together pass the limit.
  while (bytes <= limit_ && *used <= limit_ - bytes) {
    if (used_.compare_exchange_weak(*used, *used + bytes,
                                    std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

absl::Status MemoryBudget::Take(uint64_t bytes, absl::string_view what) {
  uint64_t used = 0;
  if (TryTake(bytes, &used)) return absl::OkStatus();
  // Room that reclaimable buffers hold is given before anything is refused:
  // otherwise they could fill the budget and, being freed only by the work
  // that the budget then refuses, keep it full for good.
  if (reclaimer_ && bytes <= limit_ &&
      reclaimer_(bytes - (limit_ - used)) > 0 && TryTake(bytes, &used)) {
    return absl::OkStatus();
  }
  if (on_refusal_) on_refusal_(what);
  absl::Status refused = absl::ResourceExhaustedError(absl::StrFormat(
      "%s of %d bytes refused: the shard's memory budget holds %d of %d bytes "
      "(--memory-budget-bytes); retry later, send smaller requests or raise "
      "the budget",
      what, bytes, used, limit_));
  // What fits the whole budget may find room once other buffers are freed;
  // what is larger never will.
  return bytes <= limit_ ? RetryLater(std::move(refused)) : refused;
}

}  // namespace gradwire
