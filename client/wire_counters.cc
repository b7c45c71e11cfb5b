#include "client/wire_counters.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>

namespace gradwire {
namespace {

// The inode of the file `fd` names now, or 0 when fstat fails (closed).
uint64_t InodeOf(int fd) {
  struct stat status;
  if (fstat(fd, &status) != 0) return 0;
  return static_cast<uint64_t>(status.st_ino);
}

// Before Linux 4.1 the kernel's tcp_info ends before the byte counters; a
// shorter answer means they are not there.
constexpr socklen_t kInfoWithBytes =
    offsetof(struct tcp_info, tcpi_bytes_received) +
    sizeof(tcp_info::tcpi_bytes_received);
// The segment counters follow them (Linux 4.2).
constexpr socklen_t kInfoWithSegments =
    offsetof(struct tcp_info, tcpi_segs_in) + sizeof(tcp_info::tcpi_segs_in);

constexpr uint32_t kIpv4HeaderBytes = 20;
constexpr uint32_t kIpv6HeaderBytes = 40;
constexpr uint32_t kTcpHeaderBytes = 20;
constexpr uint32_t kTimestampOptionBytes = 12;  // 10, padded to 4 bytes.

// The IP header of the packets `fd` sends, from its local address; 0
// while a dual-stack socket has none yet (unconnected, unbound).
uint32_t IpHeaderBytes(int fd) {
  sockaddr_storage address = {};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  if (address.ss_family == AF_INET) return kIpv4HeaderBytes;
  if (address.ss_family != AF_INET6) return 0;
  const in6_addr& ip = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&ip)) return kIpv4HeaderBytes;
  if (IN6_IS_ADDR_UNSPECIFIED(&ip)) return 0;
  return kIpv6HeaderBytes;
}

uint64_t Saturating(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

WireTotals WireDifference(const WireTotals& later, const WireTotals& earlier) {
  WireTotals difference;
  if (!later.known || !earlier.known) return difference;
  difference.known = true;
  difference.sent = Saturating(later.sent, earlier.sent);
  difference.received = Saturating(later.received, earlier.received);
  if (!later.headers_known || !earlier.headers_known) return difference;
  difference.headers_known = true;
  difference.sent_header_bytes =
      Saturating(later.sent_header_bytes, earlier.sent_header_bytes);
  difference.received_header_bytes =
      Saturating(later.received_header_bytes, earlier.received_header_bytes);
  return difference;
}

void WireCounters::Track(int fd) {
  const uint64_t inode = InodeOf(fd);
  if (inode == 0) return;
  Socket socket;
  socket.fd = fd;
  socket.inode = inode;
  absl::MutexLock lock(&mu_);
  tracked_any_ = true;
  // The fd's earlier socket closed unseen (its number was reused).
  auto same_fd = std::find_if(open_.begin(), open_.end(),
                              [fd](const Socket& s) { return s.fd == fd; });
  if (same_fd != open_.end()) {
    if (same_fd->inode == inode) return;
    Retire(*same_fd);
    open_.erase(same_fd);
  }
  open_.push_back(socket);
}

bool WireCounters::Refresh(Socket* socket) {
  if (InodeOf(socket->fd) != socket->inode) return false;
  struct tcp_info info = {};
  socklen_t length = sizeof(info);
  const bool read =
      getsockopt(socket->fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0 &&
      length >= kInfoWithBytes;
  const uint32_t ip_header = socket->ip_header_bytes != 0
                                 ? socket->ip_header_bytes
                                 : IpHeaderBytes(socket->fd);
  // The fd may have been closed and reused between fstat and getsockopt:
  // the answer is this socket's only if the inode still matches after it.
  if (InodeOf(socket->fd) != socket->inode) return false;
  if (!read) {
    socket->tcp_info = false;
    return true;
  }
  socket->sent = std::max<uint64_t>(socket->sent, info.tcpi_bytes_acked);
  socket->received =
      std::max<uint64_t>(socket->received, info.tcpi_bytes_received);
  if (length < kInfoWithSegments) {
    socket->segments = false;
    return true;
  }
  socket->ip_header_bytes = ip_header;
  // A segment sent with no local address to read can only be an IPv6
  // socket's whose address was not yet set: take it as IPv6.
  const uint32_t header =
      (ip_header != 0 ? ip_header : kIpv6HeaderBytes) + kTcpHeaderBytes +
      ((info.tcpi_options & TCPI_OPT_TIMESTAMPS) ? kTimestampOptionBytes : 0);
  // Unsigned differences: right across a wrap of the 32-bit counters.
  const uint32_t new_out = info.tcpi_segs_out - socket->segments_out;
  const uint32_t new_in = info.tcpi_segs_in - socket->segments_in;
  socket->segments_out = info.tcpi_segs_out;
  socket->segments_in = info.tcpi_segs_in;
  socket->sent_header_bytes += uint64_t{new_out} * header;
  socket->received_header_bytes += uint64_t{new_in} * header;
  return true;
}

void WireCounters::AddCounts(const Socket& socket, WireTotals* totals) {
  totals->sent += socket.sent;
  totals->received += socket.received;
  totals->sent_header_bytes += socket.sent_header_bytes;
  totals->received_header_bytes += socket.received_header_bytes;
}

void WireCounters::Retire(const Socket& socket) {
  retired_sent_ += socket.sent;
  retired_received_ += socket.received;
  retired_sent_header_bytes_ += socket.sent_header_bytes;
  retired_received_header_bytes_ += socket.received_header_bytes;
  if (!socket.tcp_info) unknown_ = true;
  if (!socket.segments) headers_unknown_ = true;
}

WireTotals WireCounters::Snapshot() {
  absl::MutexLock lock(&mu_);
  // Syscalls under the lock: a few per socket, and a client holds a few
  // sockets; concurrent readers would otherwise race on the retirements.
  WireTotals totals;
  totals.sent = retired_sent_;
  totals.received = retired_received_;
  totals.sent_header_bytes = retired_sent_header_bytes_;
  totals.received_header_bytes = retired_received_header_bytes_;
  bool unknown = false;
  bool headers_unknown = false;
  for (auto it = open_.begin(); it != open_.end();) {
    if (!Refresh(&*it)) {
      Retire(*it);
      AddCounts(*it, &totals);
      it = open_.erase(it);
      continue;
    }
    AddCounts(*it, &totals);
    unknown = unknown || !it->tcp_info;
    headers_unknown = headers_unknown || !it->segments;
    ++it;
  }
  unknown = unknown || unknown_;
  headers_unknown = headers_unknown || headers_unknown_;
  if (unknown || !tracked_any_) return WireTotals();
  totals.known = true;
  if (headers_unknown) {
    totals.sent_header_bytes = 0;
    totals.received_header_bytes = 0;
  } else {
    totals.headers_known = true;
  }
  return totals;
}

size_t WireCounters::open_sockets() {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace gradwire
