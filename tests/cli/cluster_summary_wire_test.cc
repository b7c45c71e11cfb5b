// The wire bytes of a `gradwire local` run: the workers' TCP byte counts
// summed beside their payload, with the ratio of the two; unknown for the
// cluster as soon as one worker could not count.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/cluster_summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::ordered_json;

Json Worker(int id) {
  Json summary = Json::object();
  summary["test_accuracy"] = 0.5;
  summary["steps"] = 10;
  summary["wall_seconds"] = 2.0;
  summary["pushed_bytes"] = 1000;
  summary["pulled_bytes"] = 3000;
  summary["dense_equivalent_bytes"] = 100000;
  summary["worker_id"] = id;
  return summary;
}

// A worker that counted its wire: `wire_sent` of `payload_sent` bytes out,
// `wire_received` of `payload_received` in.
Json CountingWorker(int id, uint64_t payload_sent, uint64_t wire_sent,
                    uint64_t payload_received, uint64_t wire_received) {
  Json summary = Worker(id);
  summary["payload_sent_bytes"] = payload_sent;
  summary["payload_received_bytes"] = payload_received;
  summary["wire_sent_bytes"] = wire_sent;
  summary["wire_received_bytes"] = wire_received;
  return summary;
}

TEST(ClusterWireBytesTest, SumsWireAndPayloadWithTheirRatio) {
  const std::vector<Json> workers = {CountingWorker(0, 1000, 1300, 3000, 3800),
                                     CountingWorker(1, 2000, 2500, 4000, 5200)};
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*cluster)["wire_sent_bytes"], 3800);
  EXPECT_EQ((*cluster)["wire_received_bytes"], 9000);
  EXPECT_EQ((*cluster)["payload_sent_bytes"], 3000);
  EXPECT_EQ((*cluster)["payload_received_bytes"], 7000);
  // (3800 + 9000) / (3000 + 7000)
  EXPECT_DOUBLE_EQ((*cluster)["wire_payload_ratio"].get<double>(), 1.28);
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("  wire bytes     3.8 kB sent, 9.0 kB received (TCP), "
                        "1.28x the payload of 3.0 kB sent, 7.0 kB "
                        "received\n"));
}

TEST(ClusterWireBytesTest, PacketBytesWithTheirRatioOnTheSameLine) {
  std::vector<Json> workers = {CountingWorker(0, 1000, 1300, 3000, 3800),
                               CountingWorker(1, 2000, 2500, 4000, 5200)};
  workers[0]["packet_sent_bytes"] = 1500;
  workers[0]["packet_received_bytes"] = 4000;
  workers[1]["packet_sent_bytes"] = 2900;
  workers[1]["packet_received_bytes"] = 5600;
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*cluster)["packet_sent_bytes"], 4400);
  EXPECT_EQ((*cluster)["packet_received_bytes"], 9600);
  // (4400 + 9600) / (3000 + 7000)
  EXPECT_DOUBLE_EQ((*cluster)["packet_payload_ratio"].get<double>(), 1.4);
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("1.28x the payload of 3.0 kB sent, 7.0 kB received; "
                        "1.40x with IP/TCP headers\n"));
  // One worker without segment counts: the cluster's packets are unknown.
  workers[1]["packet_sent_bytes"] = nullptr;
  workers[1]["packet_received_bytes"] = nullptr;
  cluster = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE((*cluster)["packet_sent_bytes"].is_null());
  EXPECT_TRUE((*cluster)["packet_payload_ratio"].is_null());
  EXPECT_EQ((*cluster)["wire_sent_bytes"], 3800);
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("received; IP/TCP headers unknown\n"));
}

TEST(ClusterWireBytesTest, OneWorkerThatCouldNotCountMakesItUnknown) {
  std::vector<Json> workers = {CountingWorker(0, 1000, 1300, 3000, 3800),
                               CountingWorker(1, 2000, 2500, 4000, 5200)};
  workers[1]["wire_sent_bytes"] = nullptr;
  workers[1]["wire_received_bytes"] = nullptr;
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(workers, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE((*cluster)["wire_sent_bytes"].is_null());
  EXPECT_TRUE((*cluster)["wire_payload_ratio"].is_null());
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              HasSubstr("  wire bytes     unknown"));
}

TEST(ClusterWireBytesTest, SummariesWithoutWireBytesHaveNoWireLine) {
  absl::StatusOr<Json> cluster =
      CombineWorkerSummaries({Worker(0), Worker(1)}, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_FALSE(cluster->contains("wire_sent_bytes"));
  EXPECT_THAT(ClusterReport(*cluster, absl::Seconds(1)),
              Not(HasSubstr("wire bytes")));
}

}  // namespace
}  // namespace gradwire::cli
