#include "server/shard/init_election.h"

#include <algorithm>

namespace gradwire {
namespace {

// How often a waiting worker asks at most: short enough that start-up
// does not wait long after the values landed, long enough that a waiting
// worker's Inits (a few hundred bytes each) cost nothing next to the
// values.
constexpr absl::Duration kLongestRetryAfter = absl::Milliseconds(200);
constexpr absl::Duration kShortestRetryAfter = absl::Milliseconds(5);

}  // namespace

InitElection::InitElection(absl::Duration provider_timeout,
                           absl::Duration preferred_grace)
    : provider_timeout_(provider_timeout),
      preferred_grace_(std::min(preferred_grace, provider_timeout)) {}

InitElection::Verdict InitElection::Wait(uint32_t provider, absl::Time until,
                                         absl::Time now) {
  Verdict verdict;
  verdict.provider = provider;
  verdict.retry_after =
      std::clamp(until - now, kShortestRetryAfter, kLongestRetryAfter);
  return verdict;
}

InitElection::Verdict InitElection::Offer(uint32_t worker, uint32_t preferred,
                                          absl::Time now) {
  if (!grace_end_.has_value()) grace_end_ = now + preferred_grace_;
  if (provider_.has_value() && now >= deadline_) {
    // It did not deliver: the post is vacant, and it is not elected again
    // while another caller comes forward.
    missed_.insert(*provider_);
    provider_.reset();
    vacant_since_ = deadline_;
  }
  if (!provider_.has_value()) {
    if (worker != preferred && !missed_.contains(preferred) &&
        now < *grace_end_) {
      return Wait(preferred, *grace_end_, now);
    }
    if (missed_.contains(worker) && vacant_since_.has_value() &&
        now < *vacant_since_ + preferred_grace_) {
      return Wait(preferred, *vacant_since_ + preferred_grace_, now);
    }
    provider_ = worker;
    deadline_ = now + provider_timeout_;
    vacant_since_.reset();
  }
  if (*provider_ != worker) return Wait(*provider_, deadline_, now);
  Verdict verdict;
  verdict.provider = worker;
  verdict.send_values = true;
  return verdict;
}

void InitElection::Extend(uint32_t worker, absl::Time now) {
  if (provider_ == worker) deadline_ = now + provider_timeout_;
}

}  // namespace gradwire
