// The summary of a `gradwire run` whose workers wrote no summary files:
// the totals of the shards' own counters (server/shard/shard_metrics.h),
// scraped from each shard's /metrics just before the shards are stopped.
//
// What the shards count, and so what this summary can say:
//   pushed bytes   gradwire_shard_received_bytes_total{rpc="push"}
//   pulled bytes   gradwire_shard_sent_bytes_total{rpc="pull"}
//   pushes         gradwire_shard_pushes_total{result="accepted"}
//   steps          gradwire_shard_chunk_clock_min (steps every worker has
//                  completed, on the slowest chunk), the least over shards
// The dense-equivalent bytes (what fp32 dense pushes would have sent) are
// counted by the workers only; the summary says so instead of a number.
//
// Thread safety: pure functions, except ScrapeShardTotals (sockets).
#ifndef GRADWIRE_CLI_SHARD_METRICS_SUMMARY_H_
#define GRADWIRE_CLI_SHARD_METRICS_SUMMARY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gradwire::cli {

// The sum of the samples of `metric` in a Prometheus text exposition whose
// labels include every pair of `labels`; empty when no sample matches.
// Comment lines, other metrics and lines that do not parse are skipped.
std::optional<double> SumOfSamples(
    absl::string_view text, absl::string_view metric,
    const std::map<std::string, std::string>& labels = {});

struct ShardTotals {
  int shards = 0;
  uint64_t pushed_bytes = 0;
  uint64_t pulled_bytes = 0;
  uint64_t accepted_pushes = 0;
  // Empty when a shard was never initialized (no worker reached it).
  std::optional<int64_t> steps;
};

// Adds up the /metrics texts of the shards (one each).
ShardTotals TotalShardMetrics(const std::vector<std::string>& texts);

// GETs /metrics from each port on 127.0.0.1 (each within `timeout`) and
// totals them. The first failed scrape's error (HttpGetLoopback, or
// UNAVAILABLE for a status other than 200), naming the port.
absl::StatusOr<ShardTotals> ScrapeShardTotals(const std::vector<int>& ports,
                                              absl::Duration timeout);

// A few lines for the terminal, in the layout of ClusterReport
// (cluster_summary.h), starting with "<tool>: ": workers, shards, steps,
// pushed and pulled bytes, the wall time (`elapsed`).
std::string ShardTotalsReport(absl::string_view tool, const ShardTotals& t,
                              int workers, absl::Duration elapsed);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_SHARD_METRICS_SUMMARY_H_
