#include "bench/load/run.h"

#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/shards.h"
#include "bench/load/workers.h"

namespace gradwire::bench {
namespace {

// Time a shard gets to write its final checkpoint and exit after SIGTERM.
constexpr absl::Duration kStopGrace = absl::Seconds(60);

using Workers = std::vector<std::unique_ptr<SimulatedWorker>>;

// Runs steps [first, end) on every worker at once, one thread each; returns
// the wall-clock seconds.
double RunPhase(const Workers& workers, uint64_t first, uint64_t end) {
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  threads.reserve(workers.size());
  for (const auto& worker : workers) {
    threads.emplace_back(
        [&worker, first, end] { worker->RunSteps(first, end); });
  }
  for (std::thread& thread : threads) thread.join();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Reads every shard's VmRSS into `rss_field` of report->shards and, when
// `final` is set, their VmHWM. Returns the first failure.
absl::Status ReadMemory(ShardFleet& fleet, bool final, RunReport* report) {
  report->shards.resize(fleet.addresses().size());
  for (uint32_t i = 0; i < report->shards.size(); ++i) {
    absl::StatusOr<ProcessMemory> memory = fleet.Memory(i);
    if (!memory.ok()) return memory.status();
    ShardMemoryReport& m = report->shards[i];
    (final ? m.rss_after_second : m.rss_after_first) = memory->rss;
    if (final) m.peak = memory->peak;
  }
  return absl::OkStatus();
}

void AddError(const absl::Status& status, RunReport* report) {
  if (report->errors++ == 0) report->first_error = status.ToString();
}

void Summarize(const LoadBenchConfig& config, const Workers& workers,
               RunReport* report) {
  WorkerTally total;
  for (const auto& worker : workers) total.Merge(worker->tally());
  report->push_rpcs = total.push_ms.size();
  report->pull_rpcs = total.pull_ms.size();
  if (report->seconds > 0) {
    report->pushes_per_s = report->push_rpcs / report->seconds;
    report->pulls_per_s = report->pull_rpcs / report->seconds;
    report->worker_steps_per_s = static_cast<double>(report->pull_rpcs) /
                                 config.shards / report->seconds;
  }
  report->push = SummarizeLatencies(&total.push_ms);
  report->pull = SummarizeLatencies(&total.pull_ms);
  report->errors += total.errors;
  if (report->first_error.empty()) report->first_error = total.first_error;
  report->bytes_sent = total.bytes_sent;
  report->bytes_received = total.bytes_received;
  report->delta_chunks = total.delta_chunks;
  report->dense_chunks = total.dense_chunks;
  report->chained_deltas = total.chained_deltas;
  report->pulled_bytes = total.pulled_bytes;
  report->dense_pull_bytes = total.dense_pull_bytes;
}

absl::StatusOr<std::unique_ptr<ShardFleet>> StartFleet(
    const LoadBenchConfig& config, const RunSpec& spec) {
  ShardFleetOptions options;
  options.server_binary = spec.server_binary;
  options.shards = config.shards;
  options.workers = config.workers;
  options.mode = config.mode;
  options.staleness = config.staleness;
  options.extra_args = spec.server_args;
  options.checkpoint_root = spec.checkpoint_root;
  options.run_dir = spec.run_dir;
  return ShardFleet::Start(options);
}

// The two phases and the memory readings after each; stops early when a
// worker failed.
void MeasurePhases(const LoadBenchConfig& config, const Workers& workers,
                   const RunAbort& abort, ShardFleet& fleet,
                   RunReport* report) {
  report->seconds = RunPhase(workers, 0, config.steps);
  if (abort.aborted()) return;
  if (absl::Status s = ReadMemory(fleet, false, report); !s.ok()) {
    return AddError(s, report);
  }
  report->seconds += RunPhase(workers, config.steps, 2 * config.steps);
  if (abort.aborted()) return;
  if (absl::Status s = ReadMemory(fleet, true, report); !s.ok()) {
    return AddError(s, report);
  }
}

}  // namespace

absl::StatusOr<RunReport> RunLoad(const LoadBenchConfig& config,
                                  const RunSpec& spec, const LoadModel& model,
                                  std::vector<WorkerPushes>* pushes) {
  absl::StatusOr<std::unique_ptr<ShardFleet>> fleet = StartFleet(config, spec);
  if (!fleet.ok()) return fleet.status();
  RunReport report;
  report.name = spec.name;
  report.server_args = spec.server_args;
  report.steps_per_phase = config.steps;
  RunAbort abort;
  Workers workers;
  std::vector<v1::InitRequest> inits = model.inits;
  for (uint32_t w = 0; w < config.workers; ++w) {
    workers.push_back(std::make_unique<SimulatedWorker>(
        w, config, model, &(*pushes)[w], (*fleet)->addresses(), &abort));
    if (absl::Status s = workers.back()->Init(&inits); !s.ok()) return s;
  }
  MeasurePhases(config, workers, abort, **fleet, &report);
  Summarize(config, workers, &report);
  if (absl::Status s = (*fleet)->Stop(kStopGrace); !s.ok()) {
    AddError(s, &report);
  }
  JudgeMemory(config, &report);
  return report;
}

}  // namespace gradwire::bench
