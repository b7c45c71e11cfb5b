// The totals of a `gradwire local` (or `gradwire run`) run, from the workers'
// --summary-json files: written as the cluster's own summary and printed as a
// short report.
#ifndef GRADWIRE_CLI_CLUSTER_SUMMARY_H_
#define GRADWIRE_CLI_CLUSTER_SUMMARY_H_

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gradwire::cli {

// A summary is one JSON object. nlohmann::ordered_json keeps its members in
// the order they were read or added, so the cluster's summary lists its keys
// in the order of worker 0's. (Only the declarations here: the callers that
// build or read summaries include <nlohmann/json.hpp>.)

// Combines the summaries of workers 0..W-1 (in worker-id order) into one
// with the keys of worker 0's, in its order, except "worker_id":
//   *_bytes and "retries"        summed over workers;
//   "steps" and *_seconds        the largest over workers;
//   everything else              worker 0's value (test_accuracy, the
//                                compressor, ...);
// then "workers": W, "shards": `shards`, and "compression_ratio":
// dense_equivalent_bytes / pushed_bytes (0 when nothing was pushed).
// Sums are exact while every value is an unsigned integer. INVALID_ARGUMENT
// when `workers` is empty or a summary lacks a finite number for
// test_accuracy (worker 0 only), steps, wall_seconds, pushed_bytes,
// pulled_bytes or dense_equivalent_bytes: 'the summary of worker I has no
// number "KEY"'.
absl::StatusOr<nlohmann::ordered_json> CombineWorkerSummaries(
    const std::vector<nlohmann::ordered_json>& workers, int shards);

// A few lines for the terminal, the first starting with "<tool>: ": test
// accuracy, bytes pushed against the dense equivalent (human units and the
// ratio), bytes pulled, wall time (`elapsed`: the whole run, start-up
// included). `cluster` comes from CombineWorkerSummaries.
std::string ClusterReport(const nlohmann::ordered_json& cluster,
                          absl::Duration elapsed,
                          absl::string_view tool = "gradwire local");

// The end of a successful run: reads the workers' summaries (the files
// `worker_summaries`, in worker-id order), combines them, writes the
// cluster's summary to `summary_json` (none when empty) and returns
// ClusterReport's lines. The summary is one line, {"key": value, ...}: the
// layout of gradwire-worker's own (apps/fashion_mnist/trainer.h), so that the
// same line-based readers take both. DATA_LOSS naming a summary that is
// missing, empty, not JSON or not a JSON object; CombineWorkerSummaries'
// errors; UNAVAILABLE when `summary_json` cannot be written.
absl::StatusOr<std::string> SummariseCluster(
    const std::vector<std::string>& worker_summaries, int shards,
    const std::string& summary_json, absl::Duration elapsed,
    absl::string_view tool = "gradwire local");

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_CLUSTER_SUMMARY_H_
