#include "cli/run_job.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/cluster_summary.h"
#include "cli/joined_shards.h"
#include "cli/local_cluster.h"
#include "cli/local_shards.h"
#include "cli/loopback_http.h"
#include "cli/run_dashboard.h"
#include "cli/run_directory.h"
#include "cli/run_environment.h"
#include "cli/shard_metrics_summary.h"
#include "cli/supervision.h"
#include "cli/worker_output.h"
#include "common/process/child_process.h"

namespace gradwire::cli {
namespace {

constexpr char kTool[] = "gradwire run";
constexpr int kRunFailedExitCode = 1;
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
// How long the workers' output may take to end once they have exited: a
// process they started may still hold their pipes.
constexpr absl::Duration kOutputDrain = absl::Seconds(2);
constexpr absl::Duration kScrapeTimeout = absl::Seconds(5);

// What LocalShards reads, from the run's options.
LocalClusterOptions ShardOptions(const RunJobOptions& o) {
  LocalClusterOptions shards;
  shards.shards = o.shards;
  shards.workers = GradwireWorkers(o);
  shards.shard_bind_address = o.shard_bind_address;
  shards.first_shard_port = o.first_shard_port;
  shards.server_args = o.server_args;
  shards.checkpoint_dir = o.checkpoint_dir;
  shards.grace = o.grace;
  shards.start_timeout = o.start_timeout;
  shards.bin_dir = o.bin_dir;
  shards.transport = o.transport;
  shards.health_transport = o.health_transport;
  return shards;
}

// This node's place in the job, for the environment contract: across
// hosts, the node's workers are its local group around a store on a free
// loopback port.
absl::StatusOr<RunEnvironment> NodePlace(const RunJobOptions& o) {
  RunEnvironment place;
  place.world_size = o.workers * std::max(o.nnodes, 1);
  place.node_rank = o.node_rank;
  place.node_workers = o.workers;
  place.master_addr = o.master_addr;
  place.master_port = o.master_port;
  place.local_group = o.nnodes > 0;
  if (place.local_group && o.workers > 1) {
    absl::StatusOr<int> port = PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    place.local_store = absl::StrCat("127.0.0.1:", *port);
  }
  return place;
}

// Writes a report of several lines at once, after what stdout holds.
void PrintReport(const std::string& report) {
  std::fflush(stdout);
  std::fwrite(report.data(), 1, report.size(), stderr);
  std::fflush(stderr);
}

class Job {
 public:
  Job(const RunJobOptions& options, RunDirectory run)
      : options_(options),
        shard_options_(ShardOptions(options)),
        run_(std::move(run)),
        supervision_(kTool, stderr, options.grace),
        shards_(shard_options_, run_, supervision_),
        dashboard_(options.dashboard, run_, supervision_) {}

  int Run();

 private:
  bool joined() const { return !options_.shard_addresses.empty(); }
  absl::Status StartLocalShards();
  absl::Status JoinShards();
  absl::Status StartDashboard();
  absl::Status StartWorkers();
  bool PollAll();
  void ReportWorkerMetrics();
  void Supervise();
  void WaitForOtherNodes();
  std::vector<int> ShardMetricsPorts() const;
  void Summarise(const absl::StatusOr<ShardTotals>& totals,
                 absl::Duration elapsed);
  int ExitCode() const;

  const RunJobOptions& options_;
  const LocalClusterOptions shard_options_;
  const RunDirectory run_;
  Supervision supervision_;
  LocalShards shards_;
  // "host:port" of every shard once they serve.
  std::vector<std::string> addresses_;
  std::unique_ptr<WorkerOutput> output_;
  std::vector<Member> workers_;
  RunDashboard dashboard_;
};

absl::Status Job::StartLocalShards() {
  if (absl::Status s = shards_.Start(); !s.ok()) return s;
  if (absl::Status s = shards_.WaitUntilServing(); !s.ok()) return s;
  addresses_ = options_.advertised_shards.empty() ? shards_.addresses()
                                                  : options_.advertised_shards;
  return absl::OkStatus();
}

// Shards started elsewhere: this run only waits until they serve.
absl::Status Job::JoinShards() {
  absl::Status joined = WaitForJoinedShards(options_, supervision_);
  if (joined.ok()) addresses_ = options_.shard_addresses;
  return joined;
}

// The dashboard scrapes the shards started here. Shards joined (node 0's,
// seen from another node, included) serve /metrics on ports this run does
// not know: their own flags chose them.
absl::Status Job::StartDashboard() {
  if (joined()) {
    supervision_.Inform(
        "dashboard: the metrics ports of shards that this run did not start "
        "are not known here; it scrapes this node's workers only");
    return dashboard_.Start({}, options_.start_timeout);
  }
  return dashboard_.Start(shards_.MetricsTargets(), options_.start_timeout);
}

absl::Status Job::StartWorkers() {
  std::vector<std::string> logs;
  for (int i = 0; i < options_.workers; ++i) logs.push_back(run_.WorkerLog(i));
  absl::StatusOr<std::unique_ptr<WorkerOutput>> output =
      WorkerOutput::Create(logs);
  if (!output.ok()) return output.status();
  output_ = *std::move(output);
  output_->Start();
  absl::StatusOr<RunEnvironment> place = NodePlace(options_);
  if (!place.ok()) return place.status();
  RunEnvironment environment = *std::move(place);
  environment.shards = addresses_;
  environment.transport = options_.transport.worker;
  environment.run_dir = std::filesystem::absolute(run_.dir()).string();
  if (options_.dashboard.enabled) {
    environment.metrics_linger_seconds = kDashboardWorkerLingerSeconds;
  }
  const std::vector<std::string> unset = UnsetTransportVariables(environment);
  for (int i = 0; i < options_.workers; ++i) {
    // A reused run directory must not pass an earlier run's summary off as
    // this one's.
    std::filesystem::remove(run_.WorkerSummary(i));
    std::filesystem::remove(run_.WorkerMetricsPortFile(i));
    SpawnOptions spawn;
    spawn.program = options_.program;
    spawn.argv = options_.command;
    // Per-worker tokens belong to gradwire's workers: nodes across hosts.
    environment.transport = WorkerTransport(
        options_.transport, options_.nnodes > 0 ? options_.node_rank : i);
    spawn.extra_env = WorkerVariables(environment, i);
    spawn.unset_env = unset;
    spawn.stdout_fd = output_->stdout_write_end(i);
    spawn.stderr_fd = output_->stderr_write_end(i);
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(spawn);
    output_->CloseWriteEnds(i);
    if (!p.ok()) return p.status();
    Member m;
    m.name = absl::StrCat("worker ", i);
    m.rank = i;
    m.log = run_.WorkerLog(i);
    m.output_shown = true;
    m.metrics_port_file = run_.WorkerMetricsPortFile(i);
    m.process = *std::move(p);
    workers_.push_back(std::move(m));
  }
  return absl::OkStatus();
}

// Prints the /metrics URL of each running worker whose endpoint is up by
// now (GRADWIRE_METRICS_PORT_FILE, run_environment.h), and adds it to the
// dashboard: a Python worker serves one once its DistributedOptimizer or
// ParameterSync connects.
void Job::ReportWorkerMetrics() {
  for (Member& w : workers_) {
    if (w.metrics_reported || !w.process->running()) continue;
    if (const int port = PortFromFile(w.metrics_port_file); port > 0) {
      supervision_.Inform(
          absl::StrCat(w.name, " metrics at ", MetricsUrl(port)));
      w.metrics_reported = true;
      dashboard_.AddWorker(port);
    }
  }
}

// Reaps what has exited and reports what failed on its own. True when the
// run must stop: a failure, or every worker is done.
bool Job::PollAll() {
  ReportWorkerMetrics();
  const bool workers_done = supervision_.ReapWorkers(workers_);
  supervision_.ReportUnexpectedExits(shards_.members(),
                                     "while the workers ran");
  dashboard_.CheckRunning("while the workers ran");
  return supervision_.failed() || workers_done;
}

void Job::Supervise() {
  while (!PollAll()) {
    if (supervision_.Sleep(kPollInterval)) return;
  }
}

std::vector<int> Job::ShardMetricsPorts() const {
  std::vector<int> ports;
  for (size_t i = 0; i < addresses_.size(); ++i) {
    ports.push_back(shards_.MetricsPort(static_cast<int>(i)));
  }
  return ports;
}

// Node 0's workers may finish before those of other nodes have pulled
// their last weights: the shards it started stay up until no byte has
// moved through them for a few seconds (joined_shards.h).
void Job::WaitForOtherNodes() {
  if (options_.nnodes < 2 || joined() || ExitCode() != 0) return;
  WaitUntilOtherNodesAreDone(ShardMetricsPorts(), supervision_);
}

int Job::ExitCode() const {
  if (supervision_.stop_signal() != 0) return 128 + supervision_.stop_signal();
  if (!supervision_.failed()) return 0;
  // The run stops at its first failure: when that is a worker's, its code
  // is the run's, as if the command had run alone.
  const Failure& first = supervision_.failures().front();
  if (first.rank >= 0 && first.exit_code.value_or(0) != 0) {
    return *first.exit_code;
  }
  return kRunFailedExitCode;
}

// The report of `gradwire local` when every worker wrote a usable summary;
// otherwise what the shards counted.
void Job::Summarise(const absl::StatusOr<ShardTotals>& totals,
                    absl::Duration elapsed) {
  std::vector<std::string> summaries;
  bool all_written = true;
  for (int i = 0; i < options_.workers; ++i) {
    summaries.push_back(run_.WorkerSummary(i));
    all_written = all_written && std::filesystem::exists(summaries.back());
  }
  if (all_written) {
    absl::StatusOr<std::string> report = SummariseCluster(
        summaries, static_cast<int>(addresses_.size()), "", elapsed, kTool);
    if (report.ok()) {
      PrintReport(*report);
      return;
    }
    supervision_.Say(absl::StrCat("the workers' summaries are not used: ",
                                  report.status().message()));
  }
  if (joined()) {
    supervision_.Inform(
        "no summary: the workers wrote none, and the metrics of joined "
        "shards are not read");
  } else if (!totals.ok()) {
    supervision_.Say(absl::StrCat("no summary: ", totals.status().message()));
  } else {
    PrintReport(ShardTotalsReport(kTool, *totals, options_.workers, elapsed));
  }
}

int Job::Run() {
  const absl::Time start = absl::Now();
  absl::Status started = joined() ? JoinShards() : StartLocalShards();
  if (started.ok() && options_.dashboard.enabled) started = StartDashboard();
  if (started.ok()) started = StartWorkers();
  if (started.ok()) Supervise();
  const int signal = supervision_.stop_signal();
  if (!started.ok() && signal == 0 && !supervision_.failed()) {
    supervision_.Fail(started.ToString());
  }
  if (signal != 0) {
    supervision_.Say(
        absl::StrCat("received ", SignalName(signal), "; stopping"));
  }
  // A stop signal goes on to the workers as it came (a Python worker sees
  // KeyboardInterrupt for SIGINT); a failure stops them with SIGTERM.
  supervision_.Stop(workers_, signal != 0 ? signal : SIGTERM);
  if (output_ != nullptr) output_->Finish(kOutputDrain);
  WaitForOtherNodes();
  // The shards' counters, read before the shards stop.
  absl::StatusOr<ShardTotals> totals =
      absl::FailedPreconditionError("not scraped");
  if (ExitCode() == 0 && !joined()) {
    totals = ScrapeShardTotals(ShardMetricsPorts(), kScrapeTimeout);
  }
  supervision_.Stop(shards_.members());
  if (!supervision_.failed() && supervision_.stop_signal() == 0) {
    shards_.CheckCleanExits();
  }
  if (ExitCode() == 0) Summarise(totals, absl::Now() - start);
  dashboard_.Linger();
  dashboard_.Stop();
  return ExitCode();
}

}  // namespace

int GradwireWorkers(const RunJobOptions& options) {
  return options.nnodes > 0 ? options.nnodes : options.workers;
}

int RunJob(const RunJobOptions& options) {
  absl::StatusOr<std::pair<RunDirectory, bool>> run_dir = MakeRunDirectory(
      options.run_dir, options.keep_logs, "--run-dir", "gradwire-run");
  if (!run_dir.ok()) {
    Announce(stderr, kTool, run_dir.status().message());
    return kRunFailedExitCode;
  }
  const std::string dir = run_dir->first.dir();
  const bool remove_after_success = run_dir->second;
  const std::string shards =
      !options.shard_addresses.empty()
          ? absl::StrCat("the shards at ",
                         absl::StrJoin(options.shard_addresses, ","))
      : options.advertised_shards.empty()
          ? absl::StrCat(options.shards, " shards on 127.0.0.1")
          : absl::StrCat(options.shards, " shards at ",
                         absl::StrJoin(options.advertised_shards, ","));
  const std::string node = options.nnodes > 0
                               ? absl::StrCat("node ", options.node_rank,
                                              " of ", options.nnodes, ": ")
                               : "";
  Announce(stderr, kTool,
           absl::StrCat(node, options.workers, " workers, ", shards,
                        "; run directory ", dir));
  int code;
  {
    Job job(options, std::move(run_dir->first));
    code = job.Run();
  }  // Every child is reaped here.
  if (code == 0 && remove_after_success) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  } else if (code != 0) {
    Announce(stderr, kTool, absl::StrCat("logs kept in ", dir));
  }
  return code;
}

}  // namespace gradwire::cli
