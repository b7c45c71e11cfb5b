// Results of gradwire-bench-load: one RunReport per run (one, or a baseline
// and a compared run), printed as text and written as JSON, with the memory
// verdict and, for two runs, their ratios.
#ifndef GRADWIRE_BENCH_LOAD_REPORT_H_
#define GRADWIRE_BENCH_LOAD_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/load/config.h"

namespace gradwire::bench {

struct LatencySummary {
  uint64_t count = 0;
  // Nearest-rank percentiles and the maximum, in milliseconds; 0 without
  // samples.
  double p50_ms = 0.0;
  double p99_ms = 0.0;
  double max_ms = 0.0;
};

// Sorts `samples` (milliseconds) and summarises them.
LatencySummary SummarizeLatencies(std::vector<float>* samples);

struct ShardMemoryReport {
  // Bytes: VmRSS after the first and the second phase, VmHWM at the end.
  uint64_t rss_after_first = 0;
  uint64_t rss_after_second = 0;
  uint64_t peak = 0;
  // rss_after_second - rss_after_first, in MiB (negative when it shrank),
  // the same per 1000 steps, and the growth allowed.
  double growth_mib = 0.0;
  double growth_mib_per_1000_steps = 0.0;
  double limit_mib = 0.0;
};

struct RunReport {
  // "run", or "baseline" and "compare".
  std::string name;
  std::vector<std::string> server_args;
  // Wall-clock seconds of the two phases of `steps_per_phase` steps.
  uint64_t steps_per_phase = 0;
  double seconds = 0.0;
  // Successful RPCs (one per worker, shard and step) and their rates.
  uint64_t push_rpcs = 0;
  uint64_t pull_rpcs = 0;
  double pushes_per_s = 0.0;
  double pulls_per_s = 0.0;
  // Steps all workers together completed per second.
  double worker_steps_per_s = 0.0;
  LatencySummary push;
  LatencySummary pull;
  uint64_t errors = 0;
  std::string first_error;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t delta_chunks = 0;
  uint64_t dense_chunks = 0;
  uint64_t chained_deltas = 0;
  // Pull responses, against dense fp32 answers of the same chunks.
  uint64_t pulled_bytes = 0;
  uint64_t dense_pull_bytes = 0;
  // By shard id; empty when the run stopped before the first phase ended.
  std::vector<ShardMemoryReport> shards;
  // Both phases ran and every shard's growth is within its limit.
  bool memory_ok = false;
};

// Fills the memory verdict of `report` from its shards' RSS figures.
void JudgeMemory(const LoadBenchConfig& config, RunReport* report);

// Ratios compare / baseline of the rates and latencies.
struct RunComparison {
  double pushes_per_s = 0.0;
  double pulls_per_s = 0.0;
  double push_p50 = 0.0;
  double push_p99 = 0.0;
  double pull_p50 = 0.0;
  double pull_p99 = 0.0;
};
RunComparison CompareRuns(const RunReport& baseline, const RunReport& compare);

// The run's figures, its shards' memory and the memory verdict line.
void PrintRun(const RunReport& report, std::FILE* out);
void PrintComparison(const RunComparison& ratios, std::FILE* out);

// Writes {"benchmark", "host", "config", "runs", "comparison", "errors",
// "first_error", "memory_ok", "ok", "notes"}; "comparison" is null for one
// run. Returns an error naming the file when it cannot be written.
absl::Status WriteLoadJson(const std::string& path,
                           const LoadBenchConfig& config, uint64_t num_chunks,
                           const std::vector<RunReport>& runs);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_REPORT_H_
