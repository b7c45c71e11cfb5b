// What a set of connections carried on the wire, as the kernel counts it
// (wire_counters.h measures it). Plain values, no gRPC: PsClient's
// interface (ps_client.h) hands them out.
#ifndef GRADWIRE_CLIENT_WIRE_TOTALS_H_
#define GRADWIRE_CLIENT_WIRE_TOTALS_H_

#include <cstdint>

namespace gradwire {

// TCP stream bytes since the counting began, both directions.
struct WireTotals {
  // False where the transport cannot say (a connection without TCP_INFO,
  // or none seen yet): sent and received are then 0 and mean nothing.
  bool known = false;
  // Bytes the peer acknowledged (a retransmission counts once).
  uint64_t sent = 0;
  uint64_t received = 0;
};

// `later` - `earlier`, per direction (0 where a total went down); unknown
// unless both are known. For a step's bytes: the difference of the
// snapshots after and before it.
WireTotals WireDifference(const WireTotals& later, const WireTotals& earlier);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_WIRE_TOTALS_H_
