#include "client/grpc_ps_client.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/aliased_request.h"
#include "client/message_parts.h"
#include "client/shard_calls.h"
#include "common/retry_metadata.h"
#include "common/threads/thread_pool.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace gradwire {

namespace {

// The threads of ForEachShard: none at first, then one more whenever a
// call finds none idle. A Pull that waits for its step holds its thread for
// as long as it waits, so a shard's call never queues behind it; the pool
// grows to the most calls ever in flight at once (a few per shard for a
// worker's push and pull threads) and keeps them.
ThreadPoolOptions CallThreadOptions() {
  ThreadPoolOptions options;
  options.threads = 0;
  options.grow_when_busy = true;
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcPsClient>> GrpcPsClient::Connect(
    std::vector<std::string> shard_addresses, ClientOptions options) {
  if (absl::Status s = ValidateClientOptions(options); !s.ok()) return s;
  if (shard_addresses.empty()) {
    return absl::InvalidArgumentError("no shard addresses");
  }
  auto wire = std::make_shared<WireCounters>();
  std::vector<std::unique_ptr<ShardConnection>> shards;
  for (size_t i = 0; i < shard_addresses.size(); ++i) {
    if (shard_addresses[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the address of shard ", i, " is empty"));
    }
    shards.push_back(std::make_unique<ShardConnection>(
        i, std::move(shard_addresses[i]), options, wire));
  }
  // Start every channel connecting before waiting on the first, so that
  // the shards connect in parallel under one deadline.
  for (const auto& shard : shards) shard->channel()->GetState(true);
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  for (const auto& shard : shards) {
    if (!shard->channel()->WaitForConnected(absl::ToChronoTime(deadline))) {
      return shard->Error(
          absl::StatusCode::kUnavailable,
          absl::StrCat("not reachable within the connect timeout of ",
                       absl::FormatDuration(options.connect_timeout),
                       options.transport.tls()
                           ? " (TLS: is the shard up with TLS, and does its "
                             "certificate chain to --tls-ca, name the "
                             "address and lie within its validity period?)"
                           : ""));
    }
  }
  return std::unique_ptr<GrpcPsClient>(
      new GrpcPsClient(std::move(options), std::move(shards), std::move(wire)));
}

GrpcPsClient::GrpcPsClient(ClientOptions options,
                           std::vector<std::unique_ptr<ShardConnection>> shards,
                           std::shared_ptr<WireCounters> wire)
    : options_(std::move(options)),
      shards_(std::move(shards)),
      wire_(std::move(wire)),
      calls_(std::make_unique<InFlightCalls>()),
      call_threads_(std::make_unique<ThreadPool>(CallThreadOptions())) {}

void GrpcPsClient::CancelCalls() { calls_->CancelAll(); }

GrpcPsClient::~GrpcPsClient() = default;

uint32_t GrpcPsClient::num_shards() const {
  return static_cast<uint32_t>(shards_.size());
}

const std::string& GrpcPsClient::address(uint32_t shard) const {
  return shards_.at(shard)->address();
}

template <typename Request>
absl::StatusOr<std::vector<uint32_t>> GrpcPsClient::ActiveShards(
    const std::vector<Request>& requests) const {
  if (requests.size() != shards_.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d requests for %d shards; pass one per shard",
                        requests.size(), shards_.size()));
  }
  std::vector<uint32_t> active;
  for (uint32_t shard = 0; shard < requests.size(); ++shard) {
    const Request& request = requests[shard];
    if (request.worker_id() != options_.worker_id) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the request for shard %d carries worker id %d but this client is "
          "worker %d",
          shard, request.worker_id(), options_.worker_id));
    }
    if (!request.chunks().empty()) active.push_back(shard);
  }
  return active;
}

absl::Status GrpcPsClient::ForEachShard(
    const std::vector<uint32_t>& shards,
    absl::FunctionRef<absl::Status(uint32_t)> call) {
  std::vector<absl::Status> results(shards.size());
  // The calling thread takes the first shard; kept threads the others.
  call_threads_->ParallelFor(shards.size(),
                             [&](size_t i) { results[i] = call(shards[i]); });
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::Init(const std::vector<v1::InitRequest>& requests,
                                std::vector<v1::InitResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::InitResponse());
  return ForEachShard(*active, [&](uint32_t shard) {
    return InitShard(shard, requests[shard], &(*responses)[shard]);
  });
}

absl::Status GrpcPsClient::Push(const std::vector<v1::PushRequest>& requests,
                                std::vector<v1::PushResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::PushResponse());
  const RpcKind kind{"Push", options_.rpc_timeout, &counters_.push_bytes_sent,
                     &counters_.push_bytes_received};
  return ForEachShard(*active, [&](uint32_t shard) {
    const ShardConnection& connection = *shards_[shard];
    const v1::PushRequest& request = requests[shard];
    v1::PushResponse* response = &(*responses)[shard];
    // The bulk bytes go out from `request` itself (AliasedPushStub).
    const auto call = [&](const v1::PushRequest& message,
                          v1::PushResponse* answer) {
      return CallWithRetries<v1::PushRequest, v1::PushResponse>(
          connection, options_, kind, message,
          [&](grpc::ClientContext* context, v1::PushResponse* out) {
            return connection.push_stub().Push(context, message, out);
          },
          answer, &counters_.retries, calls_.get());
    };
    if (request.ByteSizeLong() + kMessageMarginBytes <=
        connection.message_limit()) {
      return call(request, response);
    }
    absl::StatusOr<std::vector<v1::PushRequest>> parts =
        SplitPush(request, connection.message_limit());
    if (!parts.ok()) {
      return connection.Error(parts.status().code(), parts.status().message());
    }
    // One after another, the acks in the request's order.
    for (const v1::PushRequest& part : *parts) {
      v1::PushResponse answer;
      if (absl::Status s = call(part, &answer); !s.ok()) return s;
      for (v1::ChunkAck& ack : *answer.mutable_acks()) {
        *response->add_acks() = std::move(ack);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status GrpcPsClient::Pull(const std::vector<v1::PullRequest>& requests,
                                std::vector<v1::PullResponse>* responses) {
  absl::StatusOr<std::vector<uint32_t>> active = ActiveShards(requests);
  if (!active.ok()) return active.status();
  responses->assign(shards_.size(), v1::PullResponse());
  return ForEachShard(*active, [&](uint32_t shard) {
    return PullShard(shard, requests[shard], &(*responses)[shard]);
  });
}

TrafficStats GrpcPsClient::traffic() const {
  const auto load = [](const std::atomic<uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  };
  TrafficStats stats;
  stats.init_bytes_sent = load(counters_.init_bytes_sent);
  stats.init_bytes_received = load(counters_.init_bytes_received);
  stats.push_bytes_sent = load(counters_.push_bytes_sent);
  stats.push_bytes_received = load(counters_.push_bytes_received);
  stats.pull_bytes_sent = load(counters_.pull_bytes_sent);
  stats.pull_bytes_received = load(counters_.pull_bytes_received);
  stats.retries = load(counters_.retries);
  return stats;
}

WireTotals GrpcPsClient::wire_bytes() const { return wire_->Snapshot(); }

}  // namespace gradwire
