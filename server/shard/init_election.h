// Which worker sends a shard its initial values (internal to
// server/shard/).
//
// Workers of one job start from the same weights when they share a seed,
// so one copy of them per shard is enough. An Init without values
// (InitRequest.values_omitted) on an uninitialised shard asks the election:
// the shard's preferred worker (shard_id % num_workers, so that a job's
// shards are spread over its workers and each worker's link carries a
// share of the model, not all of it) becomes the provider if it asks
// within a short grace from the first caller; after the grace, the first
// caller does. The provider is told to send its values; every other caller
// is told to call again later. A provider that has not
// delivered by its deadline (dead, or too slow for its link) loses the
// post to the next caller, so a worker that dies at start-up holds the job
// up for at most one timeout. Values that arrive from anyone, provider or
// not, initialise the shard (the first Init with values wins, as always),
// and the election is over.
//
// The election is not durable and not journaled: it decides only who
// sends values, never what the shard holds, so a restarted shard simply
// holds a new one.
//
// Thread safety: not thread-safe; the shard holds its Init lock around
// every call.
#ifndef GRADWIRE_SERVER_SHARD_INIT_ELECTION_H_
#define GRADWIRE_SERVER_SHARD_INIT_ELECTION_H_

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

namespace gradwire {

class InitElection {
 public:
  // What a caller without values is told.
  struct Verdict {
    // True: the caller is the provider and sends its values now.
    bool send_values = false;
    // The provider (the caller itself when send_values).
    uint32_t provider = 0;
    // When the caller waits: how long before it asks again, in [5 ms,
    // 200 ms] and no longer than the time left to the provider's deadline
    // (5 ms at least), so that the values or a re-election are noticed
    // soon after they are due.
    absl::Duration retry_after;
  };

  // `provider_timeout` > 0: how long an elected provider has to deliver.
  // `preferred_grace`: how long after the first caller the preferred worker
  // is waited for (at most `provider_timeout`).
  explicit InitElection(absl::Duration provider_timeout,
                        absl::Duration preferred_grace = kPreferredGrace);

  // How long the preferred worker is waited for by default: workers of one
  // job start within a fraction of a second of one another, and a
  // non-preferred worker that waits also sends its own preferred shards'
  // values meanwhile, so only a job on fast links can lose (at most) this.
  static constexpr absl::Duration kPreferredGrace = absl::Seconds(1);

  // The verdict for `worker` at `now`, `preferred` being the worker the
  // shard would rather have send (the same for every call). Elected:
  // `preferred` whenever no provider holds the post (unless it missed a
  // deadline before); another caller once the grace from the first call
  // has passed; the first caller after a provider's deadline passed (the
  // deadline starts again from `now`). A provider that missed its deadline
  // is elected again only when no other caller came forward within one
  // grace of the post falling vacant, so a caller that asks without ever
  // delivering (a hostile one claiming the preferred id) holds start-up
  // once, not once per election. The provider asking again is told again
  // to send, with its deadline unchanged; everyone else waits, for the
  // provider or, within a grace, for `preferred`.
  Verdict Offer(uint32_t worker, uint32_t preferred, absl::Time now);

  // `worker` delivered part of its values at `now` (an Init in parts,
  // init_parts.h): when it is the provider, its deadline starts again from
  // `now`, so that a large model sent over a slow link is not taken from a
  // provider that is still sending. Otherwise nothing changes.
  void Extend(uint32_t worker, absl::Time now);

  // The current provider, if any.
  std::optional<uint32_t> provider() const { return provider_; }

  // Ends the election: the shard has its values.
  void Close() { provider_.reset(); }

 private:
  // The verdict of a caller that waits until `until`, for `provider`.
  static Verdict Wait(uint32_t provider, absl::Time until, absl::Time now);

  const absl::Duration provider_timeout_;
  const absl::Duration preferred_grace_;
  std::optional<uint32_t> provider_;
  absl::Time deadline_ = absl::InfinitePast();
  // When the grace for the preferred worker ends: set by the first call.
  std::optional<absl::Time> grace_end_;
  // Providers that missed their deadline, and when the post last fell
  // vacant (unset while a provider holds it).
  absl::flat_hash_set<uint32_t> missed_;
  std::optional<absl::Time> vacant_since_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_INIT_ELECTION_H_
