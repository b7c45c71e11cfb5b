// Bytes on the wire as the kernel counts them: the TCP stream bytes of a
// set of sockets (HTTP/2 frames, gRPC headers and TLS records included),
// beside the serialized protobuf bytes that TrafficStats (ps_client.h)
// counts. On loopback the streams carry noticeably more than the payload,
// and the share grows as pushes shrink.
//
//   auto wire = std::make_shared<WireCounters>();
//   grpc::ChannelArguments arguments;
//   AttachWireCounters(wire, &arguments);   // every socket the channel opens
//   ... channel = grpc::CreateCustomChannel(address, credentials, arguments);
//   WireTotals totals = wire->Snapshot();   // {known, sent, received}
//
// How: gRPC hands every socket it creates for the channel (or server) to a
// socket mutator (GRPC_ARG_SOCKET_MUTATOR); ours records it with Track.
// Snapshot reads getsockopt(IPPROTO_TCP, TCP_INFO) of each tracked socket:
// tcpi_bytes_acked (sent: stream bytes the peer acknowledged, so a
// retransmission counts once) and tcpi_bytes_received; the kernel counts
// a connection's SYN and FIN as one byte each there.
//
// Header bytes: tcpi_segs_out and tcpi_segs_in (Linux 4.2 and later)
// count every segment, pure acknowledgements and retransmissions too, as
// the link carries them (one per MSS, also where the kernel sends one
// large buffer through segmentation offload). Each carries an IP header,
// 20 bytes for IPv4 and 40 for IPv6 (a dual-stack socket with an
// IPv4-mapped address sends IPv4), and a TCP header, 20 bytes plus 12 when
// the connection negotiated timestamps (tcpi_options). The family is read
// from the socket's local address (getsockname) at the first read that
// finds one: gRPC hands a client socket over before it connects, when a
// dual-stack socket's address does not yet say whether it is mapped.
// Segments are added per read at the header size of that read, so the
// header bytes never go down, and the kernel's 32-bit segment counters
// may wrap without loss as long as a socket is read at least once per
// 2^32 segments.
//
// Sockets come and go: gRPC closes a connection and the kernel hands its
// descriptor number to the next socket. A socket is identified by its
// descriptor and the inode number fstat reports for it when Track sees it;
// when either no longer matches, the socket is gone, and the counters it
// showed at its last read stay in the totals (so they never go backwards).
// What a socket sent after its last read and before it closed is not
// counted: read often (once per training step) where connections churn.
//
// Unknown: where TCP_INFO cannot be read (a Unix-domain socket, a platform
// without it) the totals are unknown (WireTotals::known false), not 0:
// a partial sum would understate the wire. No tracked socket yet is
// unknown too. Where TCP_INFO has the byte counters but ends before the
// segment counters (Linux 4.1), the header bytes are unknown
// (WireTotals::headers_known false) and the stream bytes stay known.
//
// Thread safety: Track and Snapshot may be called concurrently (gRPC's
// threads track, any thread reads).
#ifndef GRADWIRE_CLIENT_WIRE_COUNTERS_H_
#define GRADWIRE_CLIENT_WIRE_COUNTERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/wire_totals.h"

namespace grpc {
class ChannelArguments;
}  // namespace grpc

namespace gradwire {

class WireCounters {
 public:
  WireCounters() = default;
  WireCounters(const WireCounters&) = delete;
  WireCounters& operator=(const WireCounters&) = delete;

  // Counts the socket `fd` from now on (what it carried before counts
  // too: the kernel's counters start at its creation). An fd that fstat
  // cannot read is ignored. Tracking an fd already tracked under another
  // inode retires the old socket first.
  void Track(int fd);

  // The totals over every socket tracked so far, reading the live ones
  // now. Each socket's counters only grow across reads.
  WireTotals Snapshot();

  // Sockets now tracked and open (for tests and logs).
  size_t open_sockets();

 private:
  struct Socket {
    int fd = -1;
    uint64_t inode = 0;
    uint64_t sent = 0;  // At the last read.
    uint64_t received = 0;
    // The kernel's segment counters at the last read, and the header
    // bytes of the segments seen so far.
    uint32_t segments_out = 0;
    uint32_t segments_in = 0;
    uint64_t sent_header_bytes = 0;
    uint64_t received_header_bytes = 0;
    // IP header bytes per segment; 0 until the local address says.
    uint32_t ip_header_bytes = 0;
    bool tcp_info = true;  // False once TCP_INFO failed on it.
    bool segments = true;  // False once TCP_INFO had no segment counters.
  };

  // Reads `socket` again; false when it is gone (closed, or its fd now
  // names another file). Its counters never go down.
  static bool Refresh(Socket* socket);
  // Adds `socket`'s counters at its last read into *totals.
  static void AddCounts(const Socket& socket, WireTotals* totals);
  // Folds `socket`'s last counters into the retired totals.
  void Retire(const Socket& socket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Socket> open_ ABSL_GUARDED_BY(mu_);
  // Sockets that went away, summed at their last read.
  uint64_t retired_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retired_received_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retired_sent_header_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retired_received_header_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Some socket ever tracked had no TCP_INFO, or none with segment counts.
  bool unknown_ ABSL_GUARDED_BY(mu_) = false;
  bool headers_unknown_ ABSL_GUARDED_BY(mu_) = false;
  bool tracked_any_ ABSL_GUARDED_BY(mu_) = false;
};

// Has every socket that a channel or server built with `arguments` creates
// (client connections, and a server's accepted connections) tracked by
// `counters`, through gRPC's socket mutator (GRPC_ARG_SOCKET_MUTATOR),
// which the arguments then own and which keeps `counters` alive as long
// as gRPC holds it. Replaces a socket mutator set before. Two channels
// built with different counters never share a connection (gRPC pools
// connections only between channels whose arguments compare equal).
void AttachWireCounters(std::shared_ptr<WireCounters> counters,
                        grpc::ChannelArguments* arguments);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_WIRE_COUNTERS_H_
