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

InitElection::InitElection(absl::Duration provider_timeout)
    : provider_timeout_(provider_timeout) {}

InitElection::Verdict InitElection::Offer(uint32_t worker, absl::Time now) {
  Verdict verdict;
  if (!provider_.has_value() || now >= deadline_) {
    provider_ = worker;
    deadline_ = now + provider_timeout_;
  }
  verdict.provider = *provider_;
  verdict.send_values = *provider_ == worker;
  if (!verdict.send_values) {
    verdict.retry_after =
        std::clamp(deadline_ - now, kShortestRetryAfter, kLongestRetryAfter);
  }
  return verdict;
}

}  // namespace gradwire
