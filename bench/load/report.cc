#include "bench/load/report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/common/report.h"

namespace gradwire::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

constexpr char kNotes[] =
    "Real gradwire-server processes on loopback, simulated workers as "
    "threads of one process with one connection per worker and shard. Each "
    "worker step sends one Push (every chunk the shard owns, Top-K with "
    "error feedback, pre-built) and then one Pull (every chunk, with the "
    "held version and the mode's min_step) to every shard, the shards in "
    "parallel. pushes_per_s and pulls_per_s count RPCs over both phases; "
    "latencies are per RPC, from call to completion, and a BSP or SSP pull "
    "includes its wait for the other workers. bytes are serialized protobuf "
    "sizes of Push and Pull requests and responses; pulled_bytes those of "
    "the Pull responses, dense_pull_bytes 4 bytes per element of every "
    "chunk they answered (dense fp32 pulls), dense_pulls_vs_pulled their "
    "ratio; chained_deltas counts the deltas after the first of chained "
    "answers. Memory: VmRSS of each "
    "shard after the first and the second phase of steps_per_phase steps; "
    "growth beyond max(max_rss_growth_mib, max_rss_growth_percent of the "
    "first reading) fails the run; peak is VmHWM at the end.";

double Percentile(const std::vector<float>& sorted, double p) {
  // Nearest rank: the smallest sample with at least p of them at or below.
  const size_t rank = static_cast<size_t>(std::ceil(p * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

using Json = nlohmann::ordered_json;

Json LatencyJson(const LatencySummary& l) {
  return {{"count", l.count},
          {"p50", Rounded(l.p50_ms, "%.4g")},
          {"p99", Rounded(l.p99_ms, "%.4g")},
          {"max", Rounded(l.max_ms, "%.4g")}};
}

Json ShardJson(size_t shard, const ShardMemoryReport& m) {
  return {
      {"shard", shard},
      {"rss_after_first_phase_mib", Rounded(m.rss_after_first / kMiB, "%.2f")},
      {"rss_after_second_phase_mib",
       Rounded(m.rss_after_second / kMiB, "%.2f")},
      {"growth_mib", Rounded(m.growth_mib, "%.3f")},
      {"growth_mib_per_1000_steps",
       Rounded(m.growth_mib_per_1000_steps, "%.3f")},
      {"limit_mib", Rounded(m.limit_mib, "%.2f")},
      {"peak_rss_mib", Rounded(m.peak / kMiB, "%.2f")}};
}

Json RunJson(const RunReport& r) {
  Json shards = Json::array();
  for (size_t i = 0; i < r.shards.size(); ++i) {
    shards.push_back(ShardJson(i, r.shards[i]));
  }
  return {{"name", r.name},
          {"server_args", r.server_args},
          {"steps_per_phase", r.steps_per_phase},
          {"seconds", Rounded(r.seconds, "%.3f")},
          {"push_rpcs", r.push_rpcs},
          {"pull_rpcs", r.pull_rpcs},
          {"pushes_per_s", Rounded(r.pushes_per_s, "%.1f")},
          {"pulls_per_s", Rounded(r.pulls_per_s, "%.1f")},
          {"worker_steps_per_s", Rounded(r.worker_steps_per_s, "%.1f")},
          {"push_latency_ms", LatencyJson(r.push)},
          {"pull_latency_ms", LatencyJson(r.pull)},
          {"errors", r.errors},
          {"first_error", r.first_error},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"delta_chunks", r.delta_chunks},
          {"dense_chunks", r.dense_chunks},
          {"chained_deltas", r.chained_deltas},
          {"pulled_bytes", r.pulled_bytes},
          {"dense_pull_bytes", r.dense_pull_bytes},
          {"dense_pulls_vs_pulled",
           r.pulled_bytes > 0 ? static_cast<double>(r.dense_pull_bytes) /
                                    static_cast<double>(r.pulled_bytes)
                              : 0.0},
          {"shards", std::move(shards)},
          {"memory_ok", r.memory_ok}};
}

Json ConfigJson(const LoadBenchConfig& c, uint64_t num_chunks) {
  return {{"workers", c.workers},
          {"shards", c.shards},
          {"params", c.params},
          {"chunks", num_chunks},
          {"partition_bytes", c.partition_bytes},
          {"density", Rounded(c.density, "%g")},
          {"value_type", std::string(PrecisionName(c.push_precision))},
          {"mode", std::string(ModeName(c.mode))},
          {"staleness", c.mode == v1::CONSISTENCY_MODE_SSP ? c.staleness : 0u},
          {"optimizer", c.optimizer},
          {"pull", c.delta_pulls ? "delta" : "dense"},
          {"pull_ratio", Rounded(c.pull_ratio, "%g")},
          {"steps_per_phase", c.steps},
          {"distinct_gradients", c.distinct_gradients},
          {"server_args", c.server_args},
          {"compare_server_args", c.compare_server_args},
          {"checkpoint_root", c.checkpoint_root},
          {"max_rss_growth_mib", Rounded(c.max_rss_growth_mib, "%g")},
          {"max_rss_growth_percent", Rounded(c.max_rss_growth_percent, "%g")}};
}

// null for one run.
Json ComparisonJson(const std::vector<RunReport>& runs) {
  if (runs.size() != 2) return nullptr;
  const RunComparison r = CompareRuns(runs[0], runs[1]);
  return {{"pushes_per_s_ratio", Rounded(r.pushes_per_s, "%.4f")},
          {"pulls_per_s_ratio", Rounded(r.pulls_per_s, "%.4f")},
          {"push_p50_ratio", Rounded(r.push_p50, "%.4f")},
          {"push_p99_ratio", Rounded(r.push_p99, "%.4f")},
          {"pull_p50_ratio", Rounded(r.pull_p50, "%.4f")},
          {"pull_p99_ratio", Rounded(r.pull_p99, "%.4f")}};
}

}  // namespace

LatencySummary SummarizeLatencies(std::vector<float>* samples) {
  LatencySummary summary;
  summary.count = samples->size();
  if (samples->empty()) return summary;
  std::sort(samples->begin(), samples->end());
  summary.p50_ms = Percentile(*samples, 0.50);
  summary.p99_ms = Percentile(*samples, 0.99);
  summary.max_ms = samples->back();
  return summary;
}

void JudgeMemory(const LoadBenchConfig& config, RunReport* report) {
  report->memory_ok = !report->shards.empty();
  for (ShardMemoryReport& m : report->shards) {
    m.growth_mib =
        (static_cast<double>(m.rss_after_second) - m.rss_after_first) / kMiB;
    m.growth_mib_per_1000_steps = m.growth_mib * 1000.0 / config.steps;
    m.limit_mib = std::max(
        config.max_rss_growth_mib,
        config.max_rss_growth_percent / 100.0 * (m.rss_after_first / kMiB));
    if (m.rss_after_second == 0 || m.growth_mib > m.limit_mib) {
      report->memory_ok = false;
    }
  }
}

RunComparison CompareRuns(const RunReport& baseline, const RunReport& compare) {
  RunComparison r;
  r.pushes_per_s = Ratio(compare.pushes_per_s, baseline.pushes_per_s);
  r.pulls_per_s = Ratio(compare.pulls_per_s, baseline.pulls_per_s);
  r.push_p50 = Ratio(compare.push.p50_ms, baseline.push.p50_ms);
  r.push_p99 = Ratio(compare.push.p99_ms, baseline.push.p99_ms);
  r.pull_p50 = Ratio(compare.pull.p50_ms, baseline.pull.p50_ms);
  r.pull_p99 = Ratio(compare.pull.p99_ms, baseline.pull.p99_ms);
  return r;
}

void PrintRun(const RunReport& r, std::FILE* out) {
  absl::FPrintF(
      out, "[%s] server args: %s\n", r.name,
      r.server_args.empty() ? "(none)" : absl::StrJoin(r.server_args, " "));
  absl::FPrintF(
      out,
      "[%s] %d steps in %.2f s: %.1f pushes/s, %.1f pulls/s (RPCs), %.1f "
      "worker steps/s\n"
      "[%s] push ms p50 %.2f p99 %.2f max %.2f | pull ms p50 %.2f p99 %.2f "
      "max %.2f\n"
      "[%s] sent %.1f MB, received %.1f MB; pulled chunks: %d delta (%d "
      "more chained), %d dense\n"
      "[%s] pulled %.1f MB, %.1fx below dense fp32 pulls (%.1f MB)\n"
      "[%s] errors: %d%s%s\n",
      r.name, 2 * r.steps_per_phase, r.seconds, r.pushes_per_s, r.pulls_per_s,
      r.worker_steps_per_s, r.name, r.push.p50_ms, r.push.p99_ms, r.push.max_ms,
      r.pull.p50_ms, r.pull.p99_ms, r.pull.max_ms, r.name, r.bytes_sent / 1e6,
      r.bytes_received / 1e6, r.delta_chunks, r.chained_deltas, r.dense_chunks,
      r.name, r.pulled_bytes / 1e6,
      r.pulled_bytes > 0 ? static_cast<double>(r.dense_pull_bytes) /
                               static_cast<double>(r.pulled_bytes)
                         : 0.0,
      r.dense_pull_bytes / 1e6, r.name, r.errors,
      r.errors > 0 ? "; first: " : "", r.first_error);
  for (size_t i = 0; i < r.shards.size(); ++i) {
    const ShardMemoryReport& m = r.shards[i];
    absl::FPrintF(out,
                  "[%s] shard %d RSS %.1f MiB after %d steps, %.1f MiB after "
                  "%d (%+.2f MiB, %+.2f MiB per 1000 steps; limit %.1f MiB), "
                  "peak %.1f MiB\n",
                  r.name, i, m.rss_after_first / kMiB, r.steps_per_phase,
                  m.rss_after_second / kMiB, 2 * r.steps_per_phase,
                  m.growth_mib, m.growth_mib_per_1000_steps, m.limit_mib,
                  m.peak / kMiB);
  }
  if (r.shards.empty() || r.shards.back().rss_after_second == 0) {
    absl::FPrintF(out, "[%s] memory: NOT MEASURED (the run stopped early)\n",
                  r.name);
  } else {
    absl::FPrintF(out,
                  "[%s] memory: %s (every shard's RSS growth from step %d to "
                  "%d must stay within its limit)\n",
                  r.name, r.memory_ok ? "OK" : "FAIL, RSS GREW",
                  r.steps_per_phase, 2 * r.steps_per_phase);
  }
  std::fflush(out);
}

void PrintComparison(const RunComparison& r, std::FILE* out) {
  absl::FPrintF(
      out,
      "compare / baseline: pushes/s %.3fx, pulls/s %.3fx | push p50 %.3fx "
      "p99 %.3fx | pull p50 %.3fx p99 %.3fx\n",
      r.pushes_per_s, r.pulls_per_s, r.push_p50, r.push_p99, r.pull_p50,
      r.pull_p99);
  std::fflush(out);
}

absl::Status WriteLoadJson(const std::string& path,
                           const LoadBenchConfig& config, uint64_t num_chunks,
                           const std::vector<RunReport>& runs) {
  Json run_json = Json::array();
  uint64_t errors = 0;
  std::string first_error;
  bool memory_ok = true;
  for (const RunReport& r : runs) {
    run_json.push_back(RunJson(r));
    errors += r.errors;
    if (first_error.empty()) first_error = r.first_error;
    memory_ok = memory_ok && r.memory_ok;
  }
  const Json report = {{"benchmark", "gradwire-bench-load"},
                       {"host", HostJson(CurrentHost())},
                       {"config", ConfigJson(config, num_chunks)},
                       {"runs", std::move(run_json)},
                       {"comparison", ComparisonJson(runs)},
                       {"errors", errors},
                       {"first_error", first_error},
                       {"memory_ok", memory_ok},
                       {"ok", errors == 0 && memory_ok},
                       {"notes", kNotes}};
  if (!WriteJsonFile(path, report)) {
    return absl::UnavailableError(
        absl::StrCat("--json: cannot write the results to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
