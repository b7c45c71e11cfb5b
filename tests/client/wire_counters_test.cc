// WireCounters on real kernel sockets: loopback TCP connections (their
// TCP_INFO byte and segment counters, over IPv4, IPv6 and IPv4-mapped
// IPv6), sockets that close and whose descriptor number is reused, and
// Unix sockets, which have no TCP_INFO.
#include "client/wire_counters.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/tcp.h>
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

// A connected IPv6 pair: `client_family` AF_INET6 to [::1], or a
// dual-stack AF_INET6 client to an IPv4 listener through the mapped
// address ::ffff:127.0.0.1 (as gRPC connects). `counters`, when given,
// tracks and reads the client before it connects, as gRPC's socket
// mutator hands it over.
// Returns false where the host has no IPv6 loopback.
bool ConnectIpv6(bool mapped, WireCounters* counters, TcpPair* pair) {
  sockaddr_in6 target = {};
  target.sin6_family = AF_INET6;
  socklen_t length = sizeof(target);
  int listener = -1;
  if (mapped) {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t v4_length = sizeof(address);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), v4_length),
              0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address),
                          &v4_length),
              0);
    EXPECT_EQ(inet_pton(AF_INET6, "::ffff:127.0.0.1", &target.sin6_addr), 1);
    target.sin6_port = address.sin_port;
  } else {
    listener = socket(AF_INET6, SOCK_STREAM, 0);
    target.sin6_addr = in6addr_loopback;
    if (listener < 0 ||
        bind(listener, reinterpret_cast<sockaddr*>(&target), length) != 0) {
      if (listener >= 0) close(listener);
      return false;
    }
    EXPECT_EQ(
        getsockname(listener, reinterpret_cast<sockaddr*>(&target), &length),
        0);
  }
  EXPECT_EQ(listen(listener, 1), 0);
  pair->client = socket(AF_INET6, SOCK_STREAM, 0);
  if (pair->client < 0) {
    close(listener);
    return false;
  }
  if (counters != nullptr) {
    counters->Track(pair->client);
    // A read while it has no address yet.
    EXPECT_TRUE(counters->Snapshot().known);
  }
  const bool connected =
      connect(pair->client, reinterpret_cast<sockaddr*>(&target), length) == 0;
  pair->server = connected ? accept(listener, nullptr, nullptr) : -1;
  close(listener);
  return connected && pair->server >= 0;
}

// The kernel's tcp_info of `fd`.
tcp_info InfoOf(int fd) {
  tcp_info info = {};
  socklen_t length = sizeof(info);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length), 0);
  return info;
}

// IP plus TCP header bytes per segment of `fd`'s connection, from its
// family and whether it negotiated timestamps.
uint64_t HeaderBytesPerSegment(int fd, uint64_t ip_header) {
  const bool timestamps = (InfoOf(fd).tcpi_options & TCPI_OPT_TIMESTAMPS) != 0;
  return ip_header + 20 + (timestamps ? 12 : 0);
}

// `rounds` exchanges of 10 bytes from `a` to `b` and 10 back, each waiting
// for the other's: every round sends at least one segment each way.
void PingPong(int a, int b, int rounds) {
  const int one = 1;
  setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char buffer[10] = {};
  const auto exchange = [&buffer](int from, int to) {
    ASSERT_EQ(write(from, buffer, sizeof(buffer)), 10);
    for (size_t got = 0; got < sizeof(buffer);) {
      const ssize_t n = read(to, buffer, sizeof(buffer) - got);
      ASSERT_GT(n, 0);
      got += static_cast<size_t>(n);
    }
  };
  for (int i = 0; i < rounds; ++i) {
    exchange(a, b);
    exchange(b, a);
  }
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

// The header bytes `totals` count for `fd`'s segments, at `per_segment`
// bytes each, lie between the kernel's counts read just before and just
// after the snapshot that `snapshot` takes.
template <typename Snapshot>
void ExpectHeadersOfKernelSegments(int fd, uint64_t per_segment,
                                   Snapshot snapshot) {
  const tcp_info before = InfoOf(fd);
  const WireTotals totals = snapshot();
  const tcp_info after = InfoOf(fd);
  ASSERT_TRUE(totals.headers_known);
  EXPECT_EQ(totals.sent_header_bytes % per_segment, 0u);
  EXPECT_EQ(totals.received_header_bytes % per_segment, 0u);
  EXPECT_GE(totals.sent_header_bytes, before.tcpi_segs_out * per_segment);
  EXPECT_LE(totals.sent_header_bytes, after.tcpi_segs_out * per_segment);
  EXPECT_GE(totals.received_header_bytes, before.tcpi_segs_in * per_segment);
  EXPECT_LE(totals.received_header_bytes, after.tcpi_segs_in * per_segment);
}

TEST(WireCountersTest, CountsTheHeadersOfEverySegmentOverIpv4) {
  const TcpPair pair = ConnectLoopback();
  WireCounters counters;
  counters.Track(pair.client);
  // 20 bytes of IPv4 header, 20 of TCP, 12 more with timestamps.
  const uint64_t per_segment = HeaderBytesPerSegment(pair.client, 20);
  constexpr int kRounds = 50;
  PingPong(pair.client, pair.server, kRounds);
  const WireTotals first = SnapshotUntil(
      &counters, [](const WireTotals& t) { return t.sent >= kRounds * 10; });
  ASSERT_TRUE(first.known);
  ASSERT_TRUE(first.headers_known);
  // Each round sent a data segment each way, the handshake more.
  EXPECT_GE(first.sent_header_bytes, kRounds * per_segment);
  EXPECT_GE(first.received_header_bytes, kRounds * per_segment);
  EXPECT_EQ(first.packet_sent(), first.sent + first.sent_header_bytes);
  EXPECT_EQ(first.packet_received(),
            first.received + first.received_header_bytes);
  EXPECT_GE(first.packet_sent() - first.sent, kRounds * per_segment);
  // They grow with the segments.
  PingPong(pair.client, pair.server, kRounds);
  const WireTotals second = SnapshotUntil(&counters, [&](const WireTotals& t) {
    return t.sent >= first.sent + kRounds * 10;
  });
  EXPECT_GE(second.sent_header_bytes,
            first.sent_header_bytes + kRounds * per_segment);
  EXPECT_GE(second.received_header_bytes,
            first.received_header_bytes + kRounds * per_segment);
  ExpectHeadersOfKernelSegments(pair.client, per_segment,
                                [&] { return counters.Snapshot(); });
  close(pair.client);
  close(pair.server);
}

TEST(WireCountersTest, Ipv6SegmentsCarryTheLongerHeader) {
  WireCounters counters;
  TcpPair pair;
  if (!ConnectIpv6(/*mapped=*/false, &counters, &pair)) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  // 40 bytes of IPv6 header: 72 with timestamps, 60 without.
  const uint64_t per_segment = HeaderBytesPerSegment(pair.client, 40);
  PingPong(pair.client, pair.server, 20);
  ExpectHeadersOfKernelSegments(pair.client, per_segment,
                                [&] { return counters.Snapshot(); });
  EXPECT_GE(counters.Snapshot().sent_header_bytes, 20 * per_segment);
  close(pair.client);
  close(pair.server);
}

TEST(WireCountersTest, MappedIpv4AddressesCarryTheIpv4Header) {
  // Tracked before it connects, when its address is still ::, as gRPC's
  // dual-stack client sockets are.
  WireCounters counters;
  TcpPair pair;
  if (!ConnectIpv6(/*mapped=*/true, &counters, &pair)) {
    GTEST_SKIP() << "no dual-stack IPv6 sockets here";
  }
  const uint64_t per_segment = HeaderBytesPerSegment(pair.client, 20);
  PingPong(pair.client, pair.server, 20);
  ExpectHeadersOfKernelSegments(pair.client, per_segment,
                                [&] { return counters.Snapshot(); });
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
  // Its header bytes stay at their last read too.
  EXPECT_TRUE(after.headers_known);
  EXPECT_GT(before.sent_header_bytes, 0u);
  EXPECT_EQ(after.sent_header_bytes, before.sent_header_bytes);
  EXPECT_EQ(after.received_header_bytes, before.received_header_bytes);
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
    EXPECT_GT(now.sent_header_bytes, last.sent_header_bytes);
    EXPECT_GE(now.received_header_bytes, last.received_header_bytes);
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
  EXPECT_FALSE(counters.Snapshot().headers_known);
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
  EXPECT_FALSE(step.headers_known);
}

TEST(WireDifferenceTest, SubtractsHeaderBytesWhereBothKnowThem) {
  const WireTotals earlier{true, 100, 40, true, 520, 104};
  const WireTotals later{true, 350, 41, true, 1040, 156};
  const WireTotals step = WireDifference(later, earlier);
  EXPECT_TRUE(step.headers_known);
  EXPECT_EQ(step.sent_header_bytes, 520u);
  EXPECT_EQ(step.received_header_bytes, 52u);
  EXPECT_EQ(step.packet_sent(), 250u + 520u);
  EXPECT_EQ(step.packet_received(), 1u + 52u);
  EXPECT_EQ(WireDifference(earlier, later).sent_header_bytes, 0u);
  // Stream bytes known, headers not (a kernel without segment counts).
  const WireTotals streams_only{true, 400, 50};
  const WireTotals partial = WireDifference(streams_only, earlier);
  EXPECT_TRUE(partial.known);
  EXPECT_EQ(partial.sent, 300u);
  EXPECT_FALSE(partial.headers_known);
  EXPECT_EQ(partial.sent_header_bytes, 0u);
  EXPECT_FALSE(WireDifference(later, streams_only).headers_known);
}

}  // namespace
}  // namespace gradwire
