// What a set of connections carried on the wire, as the kernel counts it
// (wire_counters.h measures it). Plain values, no gRPC: PsClient's
// interface (ps_client.h) hands them out.
//
// Two measures of the same traffic:
//   - stream bytes (sent, received): the TCP payload, which is the
//     serialized messages plus HTTP/2, gRPC and TLS framing;
//   - packet bytes (packet_sent(), packet_received()): the stream bytes
//     plus the IP and TCP headers of every segment, pure acknowledgements
//     and retransmissions included: what the link itself carries, up to
//     the link layer (Ethernet framing is not counted; loopback has none).
#ifndef GRADWIRE_CLIENT_WIRE_TOTALS_H_
#define GRADWIRE_CLIENT_WIRE_TOTALS_H_

#include <cstdint>

namespace gradwire {

// TCP stream bytes and the segments' header bytes since the counting
// began, both directions.
struct WireTotals {
  // False where the transport cannot say (a connection without TCP_INFO,
  // or none seen yet): every field below is then 0 and means nothing.
  bool known = false;
  // Bytes the peer acknowledged (a retransmission counts once).
  uint64_t sent = 0;
  uint64_t received = 0;
  // False where the stream bytes are known but the segment counts are not
  // (a kernel older than Linux 4.2), or where the stream bytes are unknown:
  // the header bytes are then 0 and mean nothing.
  bool headers_known = false;
  // IP header (20 bytes for IPv4, IPv4-mapped addresses included; 40 for
  // IPv6) plus TCP header (20 bytes, 32 with the timestamp option) of
  // every segment sent and received. TCP options beyond the timestamp
  // (those of the SYN, SACK blocks) are not counted, so this is a slight
  // underestimate.
  uint64_t sent_header_bytes = 0;
  uint64_t received_header_bytes = 0;

  // Stream bytes plus header bytes: meaningful only where headers_known.
  uint64_t packet_sent() const { return sent + sent_header_bytes; }
  uint64_t packet_received() const { return received + received_header_bytes; }
};

// `later` - `earlier`, per direction and per measure (0 where a total
// went down); unknown unless both are known, and headers unknown unless
// both know them. For a step's bytes: the difference of the snapshots
// after and before it.
WireTotals WireDifference(const WireTotals& later, const WireTotals& earlier);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_WIRE_TOTALS_H_
