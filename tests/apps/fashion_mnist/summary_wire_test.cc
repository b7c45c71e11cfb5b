// gradwire-worker's summary of the bytes on the wire: the payload of every
// RPC both ways, and the TCP bytes beside it, null when the transport
// could not count them.
#include <nlohmann/json.hpp>
#include <string>

#include "apps/fashion_mnist/trainer.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using Json = nlohmann::ordered_json;

TrainingResult WithTraffic() {
  TrainingResult r;
  r.payload.init_bytes_sent = 1000;
  r.payload.init_bytes_received = 10;
  r.payload.push_bytes_sent = 200;
  r.payload.push_bytes_received = 20;
  r.payload.pull_bytes_sent = 30;
  r.payload.pull_bytes_received = 3000;
  return r;
}

TEST(SummaryWireTest, PayloadAndKnownWireBytes) {
  TrainingResult r = WithTraffic();
  r.wire = WireTotals{true, 1500, 3100};
  const Json summary = Json::parse(SummaryJson(r, SyncOptions()));
  EXPECT_EQ(summary["payload_sent_bytes"], 1230);
  EXPECT_EQ(summary["payload_received_bytes"], 3030);
  EXPECT_EQ(summary["wire_sent_bytes"], 1500);
  EXPECT_EQ(summary["wire_received_bytes"], 3100);
}

TEST(SummaryWireTest, PacketBytesAddTheHeadersWhereKnown) {
  TrainingResult r = WithTraffic();
  r.wire = WireTotals{true, 1500, 3100, true, 520, 780};
  Json summary = Json::parse(SummaryJson(r, SyncOptions()));
  EXPECT_EQ(summary["packet_sent_bytes"], 2020);
  EXPECT_EQ(summary["packet_received_bytes"], 3880);
  EXPECT_EQ(summary["wire_sent_bytes"], 1500);
  // Stream bytes without segment counts: packets unknown.
  r.wire = WireTotals{true, 1500, 3100};
  r.sync.startup_wire = WireTotals{true, 100, 200, true, 52, 104};
  summary = Json::parse(SummaryJson(r, SyncOptions()));
  EXPECT_TRUE(summary["packet_sent_bytes"].is_null());
  EXPECT_TRUE(summary["packet_received_bytes"].is_null());
  EXPECT_EQ(summary["startup_packet_sent_bytes"], 152);
  EXPECT_EQ(summary["startup_packet_received_bytes"], 304);
}

TEST(SummaryWireTest, UnknownWireBytesAreNull) {
  const Json summary = Json::parse(SummaryJson(WithTraffic(), SyncOptions()));
  ASSERT_TRUE(summary.contains("wire_sent_bytes"));
  EXPECT_TRUE(summary["wire_sent_bytes"].is_null());
  EXPECT_TRUE(summary["wire_received_bytes"].is_null());
  EXPECT_TRUE(summary["packet_sent_bytes"].is_null());
  EXPECT_TRUE(summary["startup_packet_received_bytes"].is_null());
  EXPECT_EQ(summary["payload_sent_bytes"], 1230);
}

}  // namespace
}  // namespace gradwire
