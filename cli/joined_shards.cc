#include "cli/joined_shards.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/shard_metrics_summary.h"
#include "client/health_client.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kHealthTimeout = absl::Seconds(2);
constexpr absl::Duration kScrapeTimeout = absl::Seconds(5);
// How long the shards must see no pushed or pulled byte before the other
// nodes count as done with them, and the longest node 0 waits for that.
constexpr absl::Duration kNodesQuiet = absl::Seconds(3);
constexpr absl::Duration kNodesDrainLimit = absl::Minutes(5);

// What to check when node 0's shards do not answer another node.
std::string NodeZeroHint(const RunJobOptions& options) {
  if (options.nnodes == 0 || !options.advertised_shards.empty()) return "";
  return absl::StrCat(
      ": is node 0 running (gradwire run --node-rank 0) with the same "
      "--shards, --master-addr and --master-port ",
      options.master_port, ", and are ports ", options.master_port + 1, " to ",
      options.master_port + options.shard_addresses.size(),
      " open to this host?");
}

}  // namespace

absl::Status WaitForJoinedShards(const RunJobOptions& options,
                                 Supervision& supervision) {
  const absl::Time deadline = absl::Now() + options.start_timeout;
  const std::vector<std::string>& addresses = options.shard_addresses;
  for (size_t i = 0; i < addresses.size(); ++i) {
    for (;;) {
      const absl::Duration left =
          std::max(deadline - absl::Now(), absl::Milliseconds(100));
      const absl::Status health =
          CheckHealth(addresses[i], std::min(kHealthTimeout, left),
                      options.health_transport);
      if (health.ok()) break;
      if (absl::Now() > deadline) {
        supervision.Fail(absl::StrCat(
            "shard ", i, " at ", addresses[i], " did not serve within ",
            absl::FormatDuration(options.start_timeout), " (",
            health.ToString(), ")", NodeZeroHint(options)));
        return absl::DeadlineExceededError("a shard did not serve");
      }
      if (supervision.Sleep(kPollInterval)) {
        return absl::CancelledError("stop signal");
      }
    }
    supervision.Inform(
        absl::StrCat("shard ", i, " at ", addresses[i], " serves"));
  }
  return absl::OkStatus();
}

void WaitUntilOtherNodesAreDone(const std::vector<int>& metrics_ports,
                                Supervision& supervision) {
  supervision.Inform("waiting until the other nodes are done with the shards");
  const absl::Time limit = absl::Now() + kNodesDrainLimit;
  uint64_t last = 0;
  absl::Time quiet_since = absl::Now();
  while (absl::Now() < limit) {
    absl::StatusOr<ShardTotals> t =
        ScrapeShardTotals(metrics_ports, kScrapeTimeout);
    if (!t.ok()) return;
    const uint64_t moved = t->pushed_bytes + t->pulled_bytes;
    if (moved != last) {
      last = moved;
      quiet_since = absl::Now();
    } else if (absl::Now() - quiet_since >= kNodesQuiet) {
      return;
    }
    if (supervision.Sleep(absl::Milliseconds(500))) return;
  }
}

}  // namespace gradwire::cli
