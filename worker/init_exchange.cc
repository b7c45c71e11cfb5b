#include "worker/init_exchange.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/init_requests.h"

namespace gradwire {
namespace {

constexpr absl::Duration kShortestRetryAfter = absl::Milliseconds(5);

// Requests of `all` for the shards in `wanted`, empty ones (skipped by the
// client) for the others.
std::vector<v1::InitRequest> Only(const std::vector<v1::InitRequest>& all,
                                  const std::vector<bool>& wanted) {
  std::vector<v1::InitRequest> subset(all.size());
  for (size_t s = 0; s < all.size(); ++s) {
    subset[s].set_worker_id(all[s].worker_id());
    if (wanted[s]) subset[s] = all[s];
  }
  return subset;
}

// The state of the exchange between rounds.
struct Rounds {
  std::vector<v1::InitRequest> omitted;
  // Built when the first shard asks for values.
  std::optional<std::vector<v1::InitRequest>> with_values;
  std::vector<bool> pending;
  std::vector<v1::InitResponse> accepted;
};

// Sends the values to the shards that asked for them in `answers`; records
// the shards that accepted and keeps those still waiting for someone
// else's values pending. Returns how long to wait before the next round
// (zero when nothing is pending).
absl::StatusOr<absl::Duration> SettleRound(
    PsClient* client, const ChunkPlan& plan, const v1::TrainingConfig& config,
    uint32_t worker_id, const std::vector<v1::InitResponse>& answers,
    Rounds* rounds, uint32_t* shards_sent_values) {
  std::vector<bool> send(answers.size(), false);
  absl::Duration retry_after = absl::ZeroDuration();
  for (size_t s = 0; s < answers.size(); ++s) {
    if (!rounds->pending[s]) continue;
    const v1::InitResponse& answer = answers[s];
    if (answer.send_values()) {
      send[s] = true;
    } else if (answer.values_pending()) {
      // At least a few milliseconds, whatever the shard says: no busy loop.
      retry_after = std::max({retry_after, kShortestRetryAfter,
                              absl::Milliseconds(answer.retry_after_ms())});
      continue;
    } else {
      rounds->accepted[s] = answer;
    }
    rounds->pending[s] = false;
  }
  if (std::none_of(send.begin(), send.end(), [](bool b) { return b; })) {
    return retry_after;
  }
  if (!rounds->with_values) {
    auto built = BuildInitRequests(plan, config, worker_id, InitValues::kSent);
    if (!built.ok()) return built.status();
    rounds->with_values = *std::move(built);
  }
  std::vector<v1::InitResponse> sent;
  if (absl::Status s = client->Init(Only(*rounds->with_values, send), &sent);
      !s.ok()) {
    return s;
  }
  for (size_t s = 0; s < send.size(); ++s) {
    if (!send[s]) continue;
    if (sent[s].values_pending()) {
      // Another worker's values are arriving in parts (a provider elected
      // before this one that is still sending): wait for them.
      rounds->pending[s] = true;
      retry_after = std::max({retry_after, kShortestRetryAfter,
                              absl::Milliseconds(sent[s].retry_after_ms())});
      continue;
    }
    rounds->accepted[s] = sent[s];
    ++*shards_sent_values;
  }
  return retry_after;
}

// Marks the chunks whose fingerprints match the shards' as held, the others
// as held at no version; returns the others' keys.
std::vector<uint64_t> MatchFingerprints(
    const std::vector<v1::InitRequest>& requests,
    const std::vector<v1::InitResponse>& responses, ChunkPlan* plan) {
  plan->ForgetVersions();
  std::vector<uint64_t> to_pull;
  for (size_t s = 0; s < requests.size(); ++s) {
    const v1::InitRequest& request = requests[s];
    const v1::InitResponse& response = responses[s];
    const bool answered =
        response.fingerprints_size() == request.chunks_size() &&
        response.fingerprint_versions_size() == request.chunks_size();
    for (int i = 0; i < request.chunks_size(); ++i) {
      const uint64_t key = request.chunks(i).key();
      if (answered &&
          response.fingerprints(i) == request.chunks(i).fingerprint()) {
        ChunkSlot& slot = plan->slot(key);
        slot.version = response.fingerprint_versions(i);
        slot.epoch = response.history_epoch();
      } else {
        to_pull.push_back(key);
      }
    }
  }
  std::sort(to_pull.begin(), to_pull.end());
  return to_pull;
}

}  // namespace

absl::StatusOr<InitExchange> ExchangeInit(PsClient* client, ChunkPlan* plan,
                                          const v1::TrainingConfig& config,
                                          uint32_t worker_id,
                                          absl::Duration values_wait) {
  auto omitted =
      BuildInitRequests(*plan, config, worker_id, InitValues::kOmitted);
  if (!omitted.ok()) return omitted.status();
  Rounds rounds;
  rounds.omitted = *std::move(omitted);
  const size_t shards = rounds.omitted.size();
  rounds.accepted.resize(shards);
  rounds.pending.assign(shards, false);
  for (size_t s = 0; s < shards; ++s) {
    rounds.pending[s] = !rounds.omitted[s].chunks().empty();
  }
  InitExchange exchange;
  const absl::Time deadline = absl::Now() + values_wait;
  std::vector<v1::InitResponse> answers;
  while (std::any_of(rounds.pending.begin(), rounds.pending.end(),
                     [](bool b) { return b; })) {
    if (absl::Status s =
            client->Init(Only(rounds.omitted, rounds.pending), &answers);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<absl::Duration> retry_after =
        SettleRound(client, *plan, config, worker_id, answers, &rounds,
                    &exchange.shards_sent_values);
    if (!retry_after.ok()) return retry_after.status();
    for (size_t s = 0; s < shards; ++s) {
      if (rounds.pending[s] && absl::Now() + *retry_after > deadline) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "shard %d: Init: worker %d has not sent the initial values "
            "within %s (the client's pull timeout); is it running?",
            s, answers[s].values_provider(),
            absl::FormatDuration(values_wait)));
      }
    }
    absl::SleepFor(*retry_after);
  }
  exchange.keys_to_pull =
      MatchFingerprints(rounds.omitted, rounds.accepted, plan);
  exchange.responses = std::move(rounds.accepted);
  return exchange;
}

}  // namespace gradwire
