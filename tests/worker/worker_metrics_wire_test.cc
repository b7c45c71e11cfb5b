// The worker's wire byte counters: they follow the client's kernel counts
// (PsClient::wire_bytes()), and stay absent from a scrape, not 0, while
// those are unknown.
#include <string>

#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/worker_metrics.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(const metrics::Registry& registry) {
  return metrics::SerializeText(registry.Collect());
}

TEST(WorkerMetricsWireTest, UnknownWireBytesAreAbsentNotZero) {
  metrics::Registry registry;
  auto m = WorkerMetrics::Create(&registry, "0", "topk");
  ASSERT_TRUE(m.ok()) << m.status();
  (*m)->RecordWire(WireTotals());
  EXPECT_FALSE((*m)->WireBytes().known);
  EXPECT_THAT(Scrape(registry), Not(HasSubstr("gradwire_worker_wire_")));
}

TEST(WorkerMetricsWireTest, WireCountersFollowTheKnownTotals) {
  metrics::Registry registry;
  auto m = WorkerMetrics::Create(&registry, "2", "topk");
  ASSERT_TRUE(m.ok()) << m.status();
  (*m)->RecordWire(WireTotals{true, 1500, 800});
  // An unknown reading in between changes nothing.
  (*m)->RecordWire(WireTotals());
  (*m)->RecordWire(WireTotals{true, 4100, 900});
  const WireTotals wire = (*m)->WireBytes();
  EXPECT_TRUE(wire.known);
  EXPECT_EQ(wire.sent, 4100u);
  EXPECT_EQ(wire.received, 900u);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("gradwire_worker_wire_sent_bytes_total{"
                              "compressor=\"topk\",worker=\"2\"} 4100\n"));
  EXPECT_THAT(text, HasSubstr("gradwire_worker_wire_received_bytes_total{"
                              "compressor=\"topk\",worker=\"2\"} 900\n"));
}

}  // namespace
}  // namespace gradwire
