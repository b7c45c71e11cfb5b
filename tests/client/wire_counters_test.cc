// WireCounters on real kernel sockets: loopback TCP connections (their
// TCP_INFO byte counters), sockets that close and whose descriptor number
// is reused, and Unix sockets, which have no TCP_INFO.
#include "client/wire_counters.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

// The sequence numbers the kernel counts in tcpi_bytes_acked and
// tcpi_bytes_received beside the data: one for the SYN, one for the FIN.
constexpr uint64_t kSynAndFin = 2;

// A connected loopback TCP pair.
struct TcpPair {
  int client = -1;
  int server = -1;
};

TcpPair ConnectLoopback() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(listen(listener, 1), 0);
  EXPECT_EQ(
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  TcpPair pair;
  pair.client = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(connect(pair.client, reinterpret_cast<sockaddr*>(&address), length),
            0);
  pair.server = accept(listener, nullptr, nullptr);
  close(listener);
  return pair;
}

// Gives the socket *fd the descriptor number `target` (which must be
// free), as a reused number would.
void MoveTo(int* fd, int target) {
  if (*fd == target) return;
  ASSERT_EQ(fcntl(target, F_GETFD), -1)
      << "descriptor " << target << " is taken";
  ASSERT_EQ(dup2(*fd, target), target);
  close(*fd);
  *fd = target;
}

// Writes `bytes` bytes on `from` and reads them all on `to`.
void Transfer(int from, int to, size_t bytes) {
  const std::string data(bytes, 'x');
  std::thread reader([to, bytes] {
    std::string buffer(1 << 16, '\0');
    for (size_t got = 0; got < bytes;) {
      const ssize_t n = read(to, buffer.data(), buffer.size());
      ASSERT_GT(n, 0);
      got += static_cast<size_t>(n);
    }
  });
  for (size_t sent = 0; sent < bytes;) {
    const ssize_t n = write(from, data.data() + sent, bytes - sent);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  reader.join();
}

// Snapshots until `done` holds (acknowledgements arrive a moment after the
// data) or a second passes; returns the last one.
template <typename Predicate>
WireTotals SnapshotUntil(WireCounters* counters, Predicate done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  WireTotals totals = counters->Snapshot();
  while (!done(totals) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    totals = counters->Snapshot();
  }
  return totals;
}

TEST(WireCountersTest, NothingTrackedIsUnknown) {
  WireCounters counters;
  EXPECT_FALSE(counters.Snapshot().known);
}

TEST(WireCountersTest, CountsBothDirectionsOfATcpConnection) {
  const TcpPair pair = ConnectLoopback();
  WireCounters counters;
  counters.Track(pair.client);
  constexpr size_t kOut = 300000;
  constexpr size_t kIn = 70000;
  Transfer(pair.client, pair.server, kOut);
  Transfer(pair.server, pair.client, kIn);
  const WireTotals totals = SnapshotUntil(
      &counters, [](const WireTotals& t) { return t.sent >= kOut; });
  ASSERT_TRUE(totals.known);
  // A raw stream carries its bytes, and the kernel counts the SYN (and a
  // FIN) as one each.
  EXPECT_GE(totals.sent, kOut);
  EXPECT_LE(totals.sent, kOut + kSynAndFin);
  EXPECT_GE(totals.received, kIn);
  EXPECT_LE(totals.received, kIn + kSynAndFin);
  close(pair.client);
  close(pair.server);
}

TEST(WireCountersTest, KeepsAClosedSocketsBytesWhenItsFdIsReused) {
  WireCounters counters;
  TcpPair first = ConnectLoopback();
  counters.Track(first.client);
  Transfer(first.client, first.server, 50000);
  const WireTotals before = SnapshotUntil(
      &counters, [](const WireTotals& t) { return t.sent >= 50000; });
  ASSERT_GE(before.sent, 50000u);
  ASSERT_LE(before.sent, 50000u + kSynAndFin);
  const int old_fd = first.client;
  close(first.client);
  close(first.server);
  // A new socket under the closed one's number, as the kernel hands out
  // numbers again.
  TcpPair second = ConnectLoopback();
  MoveTo(&second.client, old_fd);
  const int reused = second.client;
  const int peer = second.server;
  Transfer(reused, peer, 1000);
  // The new socket under the old number is not the tracked one.
  WireTotals after = counters.Snapshot();
  EXPECT_TRUE(after.known);
  EXPECT_EQ(after.sent, before.sent);
  EXPECT_EQ(counters.open_sockets(), 0u);
  // Tracked, it adds its own bytes (all of them, from its creation).
  counters.Track(reused);
  Transfer(reused, peer, 2000);
  after = SnapshotUntil(&counters, [&](const WireTotals& t) {
    return t.sent >= before.sent + 3000;
  });
  EXPECT_GE(after.sent, before.sent + 3000);
  EXPECT_LE(after.sent, before.sent + 3000 + kSynAndFin);
  close(second.client);
  close(second.server);
}

TEST(WireCountersTest, RetrackingAReusedFdRetiresTheOldSocket) {
  WireCounters counters;
  TcpPair first = ConnectLoopback();
  counters.Track(first.client);
  Transfer(first.client, first.server, 4000);
  const WireTotals before = SnapshotUntil(
      &counters, [](const WireTotals& t) { return t.sent >= 4000; });
  const int old_fd = first.client;
  close(first.client);
  close(first.server);
  TcpPair second = ConnectLoopback();
  MoveTo(&second.client, old_fd);
  const int reused = second.client;
  // Tracked again before any read saw the old one go.
  counters.Track(reused);
  EXPECT_EQ(counters.open_sockets(), 1u);
  // The old socket's last read stays; the new one adds its handshake only.
  const WireTotals after = counters.Snapshot();
  EXPECT_GE(after.sent, before.sent);
  EXPECT_LE(after.sent, before.sent + kSynAndFin);
  EXPECT_GE(before.sent, 4000u);
  close(second.client);
  close(second.server);
}

TEST(WireCountersTest, NeverGoesBackwards) {
  WireCounters counters;
  WireTotals last;
  for (int round = 0; round < 4; ++round) {
    TcpPair pair = ConnectLoopback();
    counters.Track(pair.client);
    Transfer(pair.client, pair.server, 10000);
    const WireTotals now = SnapshotUntil(&counters, [&](const WireTotals& t) {
      return t.sent >= last.sent + 10000;
    });
    ASSERT_TRUE(now.known);
    EXPECT_GE(now.sent, last.sent + 10000) << "round " << round;
    EXPECT_GE(now.received, last.received);
    last = now;
    close(pair.client);
    close(pair.server);
  }
}

TEST(WireCountersTest, UnixSocketsAreUnknownNotZero) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  WireCounters counters;
  counters.Track(fds[0]);
  Transfer(fds[0], fds[1], 1000);
  EXPECT_FALSE(counters.Snapshot().known);
  // A TCP socket beside it does not make the sum known: it would be part.
  TcpPair pair = ConnectLoopback();
  counters.Track(pair.client);
  EXPECT_FALSE(counters.Snapshot().known);
  // Nor does the Unix socket going away.
  close(fds[0]);
  close(fds[1]);
  EXPECT_FALSE(counters.Snapshot().known);
  close(pair.client);
  close(pair.server);
}

TEST(WireCountersTest, ClosedFdIsNotTracked) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  close(fds[1]);
  WireCounters counters;
  counters.Track(fds[0]);
  EXPECT_EQ(counters.open_sockets(), 0u);
  EXPECT_FALSE(counters.Snapshot().known);
}

TEST(WireDifferenceTest, SubtractsKnownTotals) {
  const WireTotals earlier{true, 100, 40};
  const WireTotals later{true, 350, 41};
  const WireTotals step = WireDifference(later, earlier);
  EXPECT_TRUE(step.known);
  EXPECT_EQ(step.sent, 250u);
  EXPECT_EQ(step.received, 1u);
  EXPECT_EQ(WireDifference(earlier, later).sent, 0u);
  EXPECT_FALSE(WireDifference(later, WireTotals()).known);
  EXPECT_FALSE(WireDifference(WireTotals(), earlier).known);
}

}  // namespace
}  // namespace gradwire
