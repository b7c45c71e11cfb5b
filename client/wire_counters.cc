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

uint64_t Saturating(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

WireTotals WireDifference(const WireTotals& later, const WireTotals& earlier) {
  WireTotals difference;
  if (!later.known || !earlier.known) return difference;
  difference.known = true;
  difference.sent = Saturating(later.sent, earlier.sent);
  difference.received = Saturating(later.received, earlier.received);
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
  return true;
}

void WireCounters::Retire(const Socket& socket) {
  retired_sent_ += socket.sent;
  retired_received_ += socket.received;
  if (!socket.tcp_info) unknown_ = true;
}

WireTotals WireCounters::Snapshot() {
  absl::MutexLock lock(&mu_);
  // Syscalls under the lock: a few per socket, and a client holds a few
  // sockets; concurrent readers would otherwise race on the retirements.
  WireTotals totals;
  totals.sent = retired_sent_;
  totals.received = retired_received_;
  bool unknown = unknown_;
  for (auto it = open_.begin(); it != open_.end();) {
    if (!Refresh(&*it)) {
      Retire(*it);
      totals.sent += it->sent;
      totals.received += it->received;
      it = open_.erase(it);
      continue;
    }
    totals.sent += it->sent;
    totals.received += it->received;
    unknown = unknown || !it->tcp_info;
    ++it;
  }
  unknown = unknown || unknown_;
  if (unknown || !tracked_any_) return WireTotals();
  totals.known = true;
  return totals;
}

size_t WireCounters::open_sockets() {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace gradwire
