// GrpcPsClient's calls that take more than one message (grpc_ps_client.h,
// "Large messages"): an Init in parts and a Pull in rounds.
#include <vector>

#include "client/grpc_ps_client.h"
#include "client/message_parts.h"
#include "client/shard_calls.h"

namespace gradwire {

absl::Status GrpcPsClient::InitShard(uint32_t shard,
                                     const v1::InitRequest& request,
                                     v1::InitResponse* response) {
  ShardConnection& connection = *shards_[shard];
  const RpcKind kind{"Init", options_.rpc_timeout, &counters_.init_bytes_sent,
                     &counters_.init_bytes_received};
  const auto call = [&](const v1::InitRequest& message) {
    absl::Status status = CallStubWithRetries(
        connection, options_, kind, &v1::ParameterServer::Stub::Init, message,
        response, &counters_.retries, calls_.get());
    if (status.ok()) connection.LearnShardLimit(response->max_message_bytes());
    return status;
  };
  absl::StatusOr<std::vector<int>> starts =
      InitPartStarts(request, connection.message_limit());
  if (!starts.ok()) {
    return connection.Error(starts.status().code(), starts.status().message());
  }
  if (starts->size() == 1) return call(request);
  // A shard that lost the parts it held (it restarted, or another worker's
  // part 0 replaced a collection it thought abandoned) answers ABORTED: the
  // parts start over, a few times at most.
  constexpr int kMaxStarts = 3;
  for (int attempt = 1;; ++attempt) {
    absl::Status status;
    for (size_t part = 0; part < starts->size(); ++part) {
      status = call(InitPart(request, *starts, part));
      if (!status.ok() || response->values_pending()) break;
    }
    // Another worker is sending its values: the caller waits for them as
    // for an elected provider's (worker/init_exchange.h).
    if (status.ok() && response->values_pending()) return status;
    if (status.ok()) break;
    if (!absl::IsAborted(status) || attempt >= kMaxStarts) return status;
  }
  // The parts' answers carry no versions or fingerprints: the Init without
  // values brings them for every declared chunk, in the request's order.
  return call(WithoutValues(request));
}

absl::Status GrpcPsClient::PullShard(uint32_t shard,
                                     const v1::PullRequest& request,
                                     v1::PullResponse* response) {
  const ShardConnection& connection = *shards_[shard];
  const RpcKind kind{"Pull", options_.pull_timeout, &counters_.pull_bytes_sent,
                     &counters_.pull_bytes_received};
  v1::PullRequest rest = request;
  rest.set_allow_partial(true);
  response->Clear();
  // A shard that restarts between two rounds answers from another history:
  // the rounds start over, a few times at most.
  constexpr int kMaxStarts = 3;
  for (int starts = 1;;) {
    v1::PullResponse round;
    if (absl::Status s = CallStubWithRetries(
            connection, options_, kind, &v1::ParameterServer::Stub::Pull, rest,
            &round, &counters_.retries, calls_.get());
        !s.ok()) {
      return s;
    }
    const bool first_round = response->chunks().empty();
    if (!first_round && round.history_epoch() != response->history_epoch()) {
      if (++starts > kMaxStarts) {
        return connection.Error(
            absl::StatusCode::kUnavailable,
            "Pull: the shard's history changed between the rounds of a pull "
            "too large for one message; pull again");
      }
      response->Clear();
      rest = request;
      rest.set_allow_partial(true);
      continue;
    }
    response->set_history_epoch(round.history_epoch());
    const int answered = round.chunks_size();
    for (v1::ChunkWeights& chunk : *round.mutable_chunks()) {
      *response->add_chunks() = std::move(chunk);
    }
    if (!round.partial()) return absl::OkStatus();
    if (answered == 0 || answered >= rest.chunks_size()) {
      return connection.Error(absl::StatusCode::kInternal,
                              "Pull: a partial answer answered no chunk");
    }
    rest.mutable_chunks()->DeleteSubrange(0, answered);
  }
}

}  // namespace gradwire
