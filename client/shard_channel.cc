#include "client/shard_channel.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/tls/grpc_transport.h"
#include "grpcpp/support/channel_arguments.h"

namespace gradwire {
namespace {

int Milliseconds(absl::Duration duration) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(duration), 1, 1 << 30));
}

}  // namespace

std::shared_ptr<grpc::Channel> CreateShardChannel(
    const std::string& address, const ClientOptions& options,
    std::shared_ptr<WireCounters> wire) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  arguments.SetMaxReceiveMessageSize(
      static_cast<int>(options.max_message_bytes));
  // gRPC's default reconnect backoff starts at 1 s and grows to 120 s: a
  // shard that restarts would stay unreachable long after it listens again,
  // and our retries would run out against a channel that is not trying.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                   Milliseconds(options.initial_backoff));
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                   Milliseconds(options.max_backoff));
  // A connection of its own: a shard counts a worker's pulls by connection
  // where it has no per-worker token, so workers of one process must not
  // share one (gRPC shares them between channels of equal arguments).
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (wire != nullptr) AttachWireCounters(std::move(wire), &arguments);
  return CreateSecureChannel(address, options.transport, std::move(arguments));
}

}  // namespace gradwire
