// The bound of gradwire-bench-server: the pushers' serialized requests sent
// over plain loopback TCP connections, one per pusher, to a reader that
// checks the framing and discards the bytes. No protobuf, no HTTP/2, no
// replies, no shard: what the kernel's loopback path alone costs.
//
// Thread safety: one Transfer at a time.
#ifndef GRADWIRE_BENCH_SERVER_TCP_H_
#define GRADWIRE_BENCH_SERVER_TCP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/server/workload.h"

namespace gradwire::bench {

class TcpLoopback {
 public:
  // Opens `connections` connected pairs of TCP sockets on 127.0.0.1 (an
  // OS-chosen port). Each socket's send and receive time out after
  // kCallDeadlineSeconds. UNAVAILABLE naming the failed system call.
  static absl::StatusOr<std::unique_ptr<TcpLoopback>> Open(
      uint32_t connections);

  // Closes every socket.
  ~TcpLoopback();
  TcpLoopback(const TcpLoopback&) = delete;
  TcpLoopback& operator=(const TcpLoopback&) = delete;

  // For each w < loads.size() (at most the number of connections), at once:
  // a writer thread sends loads[w].frames, `rounds` times, one send per
  // frame, over connection w, and a reader thread receives them in blocks,
  // walking the 4-byte length prefixes, and discards them. Returns when
  // every reader has all its frames; DATA_LOSS if the framing does not add
  // up, UNAVAILABLE (with errno's text) if a socket call fails or times out.
  absl::Status Transfer(absl::Span<const PusherLoad> loads, int rounds);

 private:
  TcpLoopback() = default;

  // Constant after Open. senders_[w] is connected to receivers_[w].
  std::vector<int> senders_;
  std::vector<int> receivers_;
};

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_TCP_H_
