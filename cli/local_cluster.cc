#include "cli/local_cluster.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "cli/cluster_summary.h"
#include "cli/local_shards.h"
#include "cli/run_dashboard.h"
#include "cli/run_directory.h"
#include "cli/supervision.h"
#include "common/process/child_process.h"

namespace gradwire::cli {
namespace {

constexpr char kTool[] = "gradwire local";
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

template <typename... Args>
void Say(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Announce(stderr, kTool, absl::StrFormat(format, args...));
}

class LocalCluster {
 public:
  LocalCluster(const LocalClusterOptions& options, RunDirectory run)
      : options_(options),
        run_(std::move(run)),
        supervision_(kTool, stdout, options.grace),
        shards_(options_, run_, supervision_),
        dashboard_(options_.dashboard, run_, supervision_) {}

  int Run();

 private:
  void ReportWorkerMetrics();
  absl::Status StartWorkers();
  void Supervise();
  bool PollAll();
  int ExitCode() const;
  absl::Status Summarise(absl::Duration elapsed);

  const LocalClusterOptions& options_;
  const RunDirectory run_;
  Supervision supervision_;
  LocalShards shards_;
  std::vector<Member> workers_;
  RunDashboard dashboard_;
};

// Prints the /metrics URL of each worker whose endpoint is up by now.
void LocalCluster::ReportWorkerMetrics() {
  for (Member& w : workers_) {
    if (w.metrics_reported) continue;
    if (const int port = PortFromFile(w.metrics_port_file); port > 0) {
      supervision_.Inform(
          absl::StrCat(w.name, " metrics at ", MetricsUrl(port)));
      w.metrics_reported = true;
      dashboard_.AddWorker(port);
    }
  }
}

absl::Status LocalCluster::StartWorkers() {
  const std::string shards = absl::StrJoin(shards_.addresses(), ",");
  const std::vector<std::string> env = WorkerEnvironment(options_.workers);
  for (int i = 0; i < options_.workers; ++i) {
    std::filesystem::remove(run_.WorkerSummary(i));
    std::filesystem::remove(run_.WorkerMetricsPortFile(i));
    Member m;
    m.name = absl::StrCat("worker ", i);
    m.rank = i;
    m.log = run_.WorkerLog(i);
    m.metrics_port_file = run_.WorkerMetricsPortFile(i);
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(WorkerCommand(options_, run_, shards, i, env));
    if (!p.ok()) return p.status();
    m.process = std::move(*p);
    workers_.push_back(std::move(m));
  }
  return absl::OkStatus();
}

// Reaps what has exited; reports every process that failed on its own.
// True when the run must stop (a failure, or every worker is done).
bool LocalCluster::PollAll() {
  ReportWorkerMetrics();
  const bool workers_done = supervision_.ReapWorkers(workers_);
  supervision_.ReportUnexpectedExits(shards_.members(),
                                     "while the workers ran");
  dashboard_.CheckRunning("while the workers ran");
  return supervision_.failed() || workers_done;
}

void LocalCluster::Supervise() {
  while (!PollAll()) {
    if (supervision_.Sleep(kPollInterval)) return;
  }
}

int LocalCluster::ExitCode() const {
  if (supervision_.stop_signal() != 0) return 128 + supervision_.stop_signal();
  if (!supervision_.failed()) return 0;
  // Only workers that rejected their flags: a usage error.
  for (const Failure& f : supervision_.failures()) {
    if (f.rank < 0 || f.exit_code != kWorkerUsageExitCode) {
      return kClusterFailedExitCode;
    }
  }
  return kWorkerUsageExitCode;
}

absl::Status LocalCluster::Summarise(absl::Duration elapsed) {
  std::vector<std::string> summaries;
  for (size_t i = 0; i < workers_.size(); ++i) {
    summaries.push_back(run_.WorkerSummary(i));
  }
  absl::StatusOr<std::string> report = SummariseCluster(
      summaries, options_.shards, options_.summary_json, elapsed);
  if (!report.ok()) return report.status();
  std::fputs(report->c_str(), stdout);
  std::fflush(stdout);
  return absl::OkStatus();
}

int LocalCluster::Run() {
  const absl::Time start = absl::Now();
  absl::Status started = shards_.Start();
  if (started.ok()) started = shards_.WaitUntilServing();
  // The workers' /metrics join the dashboard as their ports appear.
  if (started.ok() && options_.dashboard.enabled) {
    started =
        dashboard_.Start(shards_.MetricsTargets(), options_.start_timeout);
  }
  if (started.ok()) started = StartWorkers();
  if (started.ok()) Supervise();
  const int signal = supervision_.stop_signal();
  if (!started.ok() && signal == 0 && !supervision_.failed()) {
    supervision_.Fail(started.ToString());
  }
  if (signal != 0) {
    if (isatty(STDOUT_FILENO)) std::printf("\n");  // End a progress bar.
    Say("received %s; stopping", strsignal(signal));
  }
  supervision_.Stop(workers_);
  supervision_.Stop(shards_.members());
  // After a run that went well, a shard must also have stopped cleanly
  // (its final checkpoint written).
  if (!supervision_.failed() && supervision_.stop_signal() == 0) {
    shards_.CheckCleanExits();
  }
  if (ExitCode() == 0) {
    if (absl::Status s = Summarise(absl::Now() - start); !s.ok()) {
      supervision_.Fail(s.message());
    }
  }
  dashboard_.Linger();
  dashboard_.Stop();
  return ExitCode();
}

}  // namespace

int RunLocalCluster(const LocalClusterOptions& options) {
  absl::StatusOr<std::pair<RunDirectory, bool>> run_dir =
      MakeRunDirectory(options.log_dir, options.keep_logs);
  if (!run_dir.ok()) {
    Say("%s", run_dir.status().message());
    return kClusterFailedExitCode;
  }
  const std::string dir = run_dir->first.dir();
  const bool remove_after_success = run_dir->second;
  Announce(stdout, kTool,
           absl::StrFormat("%d shards, %d workers; logs in %s", options.shards,
                           options.workers, dir));
  int code;
  {
    LocalCluster cluster(options, std::move(run_dir->first));
    code = cluster.Run();
  }  // Every child is reaped here.
  if (code == 0 && remove_after_success) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  } else if (code != 0) {
    Say("logs kept in %s", dir);
  }
  return code;
}

}  // namespace gradwire::cli
