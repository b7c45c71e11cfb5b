#include "cli/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "cli/cluster_summary.h"
#include "cli/dashboard.h"
#include "cli/run_directory.h"
#include "cli/stop_signals.h"
#include "client/health_client.h"
#include "common/process/child_process.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kHealthTimeout = absl::Seconds(2);
constexpr int kLogTailLines = 15;

template <typename... Args>
void Say(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::fflush(stdout);
  absl::FPrintF(stderr, "gradwire local: %s\n",
                absl::StrFormat(format, args...));
}

// A supervised process: a shard or a worker.
struct Member {
  std::string name;  // "shard 0", "worker 1"
  std::string log;   // Its log file (worker 0: stderr only).
  std::unique_ptr<ChildProcess> process;
  // Set before this process is asked to stop: an exit after that is not a
  // failure of its own.
  bool stopping = false;
  // Where it writes the port of its /metrics endpoint, and whether its URL
  // was printed.
  std::string metrics_port_file;
  bool metrics_reported = false;
};

class LocalCluster {
 public:
  LocalCluster(const LocalClusterOptions& options, RunDirectory run)
      : options_(options), run_(std::move(run)) {}

  int Run();

 private:
  absl::Status StartShards();
  absl::Status WaitUntilServing();
  int ShardPort(int shard) const;
  void ReportWorkerMetrics();
  absl::Status StartDashboard();
  absl::Status WaitUntilDashboardReady(int port);
  void AddDashboardTarget(int worker_metrics_port);
  void KeepDashboardUp();
  absl::Status StartWorkers();
  void Supervise();
  bool PollAll();
  void Stop(std::vector<Member>& group);
  void CheckShardExits();
  bool Sleep(absl::Duration d);
  void ReportFailure(const Member& m, absl::string_view why);
  int ExitCode() const;
  absl::Status Summarise(absl::Duration elapsed);

  const LocalClusterOptions& options_;
  const RunDirectory run_;
  const StopSignals signals_;
  std::vector<Member> shards_;
  std::vector<Member> workers_;
  // Prometheus, with --dashboard once started; its port once it is ready,
  // and the workers' /metrics it was told to scrape.
  std::vector<Member> dashboard_;
  int dashboard_port_ = 0;
  std::vector<std::string> worker_targets_;
  std::vector<std::string> addresses_;
  // The first stop signal, and how many came: a second one skips the grace
  // periods.
  int stop_signal_ = 0;
  int stop_signals_received_ = 0;
  bool failed_ = false;
  // Every failed worker exited with the usage code.
  bool only_usage_failures_ = true;
};

// Sleeps up to `d`; true (and stop_signal_ set) when a stop signal came.
bool LocalCluster::Sleep(absl::Duration d) {
  const int s = signals_.Wait(d);
  if (s == 0) return false;
  if (stop_signal_ == 0) stop_signal_ = s;
  ++stop_signals_received_;
  return true;
}

void LocalCluster::ReportFailure(const Member& m, absl::string_view why) {
  failed_ = true;
  const std::optional<int> code = m.process->exit_code();
  if (m.name.rfind("worker", 0) != 0 || code != 2) only_usage_failures_ = false;
  const std::string tail = TailOfFile(m.log, kLogTailLines);
  Say("%s %s; last lines of %s:\n%s", m.name, why, m.log,
      tail.empty() ? "  (empty)"
                   : absl::StrCat("  | ", absl::StrReplaceAll(
                                              tail, {{"\n", "\n  | "}})));
}

absl::Status LocalCluster::StartShards() {
  for (int i = 0; i < options_.shards; ++i) {
    std::filesystem::remove(run_.ShardPortFile(i));
    std::filesystem::remove(run_.ShardMetricsPortFile(i));
    Member m;
    m.name = absl::StrCat("shard ", i);
    m.log = run_.ShardLog(i);
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(ShardCommand(options_, run_, i));
    if (!p.ok()) return p.status();
    m.process = std::move(*p);
    shards_.push_back(std::move(m));
  }
  return absl::OkStatus();
}

// The port from shard i's port file, once it is complete; 0 before.
int LocalCluster::ShardPort(int shard) const {
  return PortFromFile(run_.ShardPortFile(shard));
}

// Prints the /metrics URL of each worker whose endpoint is up by now.
void LocalCluster::ReportWorkerMetrics() {
  for (Member& w : workers_) {
    if (w.metrics_reported) continue;
    if (const int port = PortFromFile(w.metrics_port_file); port > 0) {
      std::printf("gradwire local: %s metrics at %s\n", w.name.c_str(),
                  MetricsUrl(port).c_str());
      std::fflush(stdout);
      w.metrics_reported = true;
      AddDashboardTarget(port);
    }
  }
}

absl::Status LocalCluster::WaitUntilServing() {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  addresses_.assign(shards_.size(), "");
  for (size_t i = 0; i < shards_.size(); ++i) {
    Member& shard = shards_[i];
    absl::Status health = absl::UnavailableError("no port file yet");
    for (;;) {
      if (!shard.process->running()) {
        ReportFailure(shard, absl::StrCat("exited with code ",
                                          *shard.process->exit_code(),
                                          " while starting"));
        return absl::UnavailableError("a shard did not start");
      }
      if (const int port = ShardPort(i); port > 0) {
        addresses_[i] = absl::StrCat("127.0.0.1:", port);
        health = CheckHealth(addresses_[i], kHealthTimeout,
                             options_.health_transport);
        if (health.ok()) break;
      }
      if (absl::Now() > deadline) {
        ReportFailure(shard,
                      absl::StrCat("did not serve within ",
                                   absl::FormatDuration(options_.start_timeout),
                                   " (", health.ToString(), ")"));
        return absl::DeadlineExceededError("a shard did not start");
      }
      if (Sleep(kPollInterval)) return absl::CancelledError("stop signal");
    }
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    // The metrics port file is written before the port file.
    const int metrics_port = PortFromFile(run_.ShardMetricsPortFile(i));
    std::printf(
        "gradwire local: shard %zu serving on %s, metrics at %s (log %s)\n", i,
        addresses_[i].c_str(), MetricsUrl(metrics_port).c_str(),
        shards_[i].log.c_str());
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

// Starts Prometheus on the shards' /metrics (the workers follow through the
// targets file), waits until it is ready and prints the dashboard's URL.
absl::Status LocalCluster::StartDashboard() {
  const DashboardOptions& dashboard = options_.dashboard;
  int port = dashboard.port;
  if (port == 0) {
    absl::StatusOr<int> free_port = PickFreeLoopbackPort();
    if (!free_port.ok()) return free_port.status();
    port = *free_port;
  }
  std::vector<std::string> shard_targets;
  for (size_t i = 0; i < shards_.size(); ++i) {
    shard_targets.push_back(
        absl::StrCat("127.0.0.1:", PortFromFile(run_.ShardMetricsPortFile(i))));
  }
  // A reused --log-dir must not show an earlier run's series.
  std::error_code ignored;
  std::filesystem::remove_all(run_.PrometheusData(), ignored);
  absl::Status written = WriteFileAtomically(run_.PrometheusWorkerTargets(),
                                             FileDiscoveryTargets({}));
  if (written.ok()) {
    written = WriteFileAtomically(
        run_.PrometheusConfig(),
        PrometheusConfig(shard_targets, run_.PrometheusWorkerTargets(),
                         kDashboardScrapeInterval));
  }
  if (!written.ok()) return written;
  Member m;
  m.name = "prometheus";
  m.log = run_.PrometheusLog();
  absl::StatusOr<std::unique_ptr<ChildProcess>> p =
      ChildProcess::Spawn(PrometheusCommand(dashboard, run_, port));
  if (!p.ok()) return p.status();
  m.process = std::move(*p);
  dashboard_.push_back(std::move(m));
  if (absl::Status ready = WaitUntilDashboardReady(port); !ready.ok()) {
    return ready;
  }
  dashboard_port_ = port;
  std::printf("gradwire local: dashboard at %s (Prometheus log %s)\n",
              DashboardUrl(port).c_str(), dashboard_[0].log.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status LocalCluster::WaitUntilDashboardReady(int port) {
  Member& prometheus = dashboard_[0];
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (;;) {
    const absl::Status ready = CheckPrometheusReady(port, kHealthTimeout);
    if (ready.ok()) return absl::OkStatus();
    if (!prometheus.process->running()) {
      ReportFailure(prometheus, absl::StrCat("exited with code ",
                                             *prometheus.process->exit_code(),
                                             " while starting"));
      return absl::UnavailableError("the dashboard did not start");
    }
    if (absl::Now() > deadline) {
      ReportFailure(prometheus,
                    absl::StrCat("was not ready within ",
                                 absl::FormatDuration(options_.start_timeout),
                                 " (", ready.message(), ")"));
      return absl::DeadlineExceededError("the dashboard did not start");
    }
    if (Sleep(kPollInterval)) return absl::CancelledError("stop signal");
  }
}

// Adds a worker's /metrics to the dashboard's targets (a no-op without the
// dashboard). A failed write only costs the dashboard that worker: it is
// said, and the run goes on.
void LocalCluster::AddDashboardTarget(int worker_metrics_port) {
  if (dashboard_port_ == 0) return;
  worker_targets_.push_back(absl::StrCat("127.0.0.1:", worker_metrics_port));
  if (absl::Status s =
          WriteFileAtomically(run_.PrometheusWorkerTargets(),
                              FileDiscoveryTargets(worker_targets_));
      !s.ok()) {
    Say("dashboard: %s", s.message());
  }
}

// After the run, the dashboard stays up for its linger time so that the
// last points can be seen. A stop signal here only ends the wait: the run's
// exit code stands.
void LocalCluster::KeepDashboardUp() {
  const absl::Duration linger = options_.dashboard.linger;
  if (dashboard_port_ == 0 || stop_signal_ != 0 ||
      linger <= absl::ZeroDuration() || !dashboard_[0].process->running()) {
    return;
  }
  std::printf(
      "gradwire local: dashboard stays up for %s at %s (Ctrl-C stops "
      "it)\n",
      absl::FormatDuration(linger).c_str(),
      DashboardUrl(dashboard_port_).c_str());
  std::fflush(stdout);
  const absl::Time end = absl::Now() + linger;
  while (absl::Now() < end && dashboard_[0].process->running()) {
    if (signals_.Wait(std::min(absl::Milliseconds(250), end - absl::Now())) !=
        0) {
      return;
    }
  }
}

absl::Status LocalCluster::StartWorkers() {
  const std::string shards = absl::StrJoin(addresses_, ",");
  const std::vector<std::string> env = WorkerEnvironment(options_.workers);
  for (int i = 0; i < options_.workers; ++i) {
    std::filesystem::remove(run_.WorkerSummary(i));
    std::filesystem::remove(run_.WorkerMetricsPortFile(i));
    Member m;
    m.name = absl::StrCat("worker ", i);
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
  bool workers_done = true;
  for (Member& w : workers_) {
    if (w.process->running()) {
      workers_done = false;
    } else if (*w.process->exit_code() != 0 && !w.stopping) {
      w.stopping = true;
      ReportFailure(w,
                    absl::StrCat("exited with code ", *w.process->exit_code()));
    }
  }
  for (std::vector<Member>* group : {&shards_, &dashboard_}) {
    for (Member& m : *group) {
      if (!m.process->running() && !m.stopping) {
        m.stopping = true;
        ReportFailure(m,
                      absl::StrCat("exited with code ", *m.process->exit_code(),
                                   " while the workers ran"));
      }
    }
  }
  return failed_ || workers_done;
}

void LocalCluster::Supervise() {
  while (!PollAll()) {
    if (Sleep(kPollInterval)) return;
  }
}

// SIGTERM to every running member of `group`, SIGKILL to those still running
// after the grace period, or at once when a stop signal arrives meanwhile
// or two have arrived in all.
void LocalCluster::Stop(std::vector<Member>& group) {
  bool any = false;
  for (Member& m : group) {
    m.stopping = true;
    if (m.process->running()) {
      m.process->Signal(SIGTERM);
      any = true;
    }
  }
  if (!any) return;
  const absl::Time deadline = absl::Now() + options_.grace;
  const auto running = [&group] {
    return std::any_of(group.begin(), group.end(),
                       [](Member& m) { return m.process->running(); });
  };
  // A stop signal now (a second Ctrl-C) cuts the grace period short.
  bool hurried = stop_signals_received_ >= 2;
  while (!hurried && running() && absl::Now() < deadline) {
    hurried = Sleep(kPollInterval);
  }
  for (Member& m : group) {
    if (!m.process->running()) continue;
    Say("killing %s%s", m.name,
        hurried ? ""
                : absl::StrCat(" (still running ",
                               absl::FormatDuration(options_.grace),
                               " after SIGTERM)"));
    m.process->Signal(SIGKILL);
    m.process->Wait();
  }
}

// After a run that went well, a shard must also have stopped cleanly (its
// final checkpoint written).
void LocalCluster::CheckShardExits() {
  if (failed_ || stop_signal_ != 0) return;
  for (const Member& s : shards_) {
    const std::optional<int> code = s.process->exit_code();
    if (code.has_value() && *code != 0) {
      ReportFailure(s,
                    absl::StrCat("exited with code ", *code, " after SIGTERM"));
    }
  }
}

int LocalCluster::ExitCode() const {
  if (stop_signal_ != 0) return 128 + stop_signal_;
  if (failed_) {
    return only_usage_failures_ ? kWorkerUsageExitCode : kClusterFailedExitCode;
  }
  return 0;
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
  absl::Status started = StartShards();
  if (started.ok()) started = WaitUntilServing();
  if (started.ok() && options_.dashboard.enabled) started = StartDashboard();
  if (started.ok()) started = StartWorkers();
  if (started.ok()) Supervise();
  if (!started.ok() && stop_signal_ == 0 && !failed_) {
    failed_ = true;
    only_usage_failures_ = false;
    Say("%s", started.ToString());
  }
  if (stop_signal_ != 0) {
    if (isatty(STDOUT_FILENO)) std::printf("\n");  // End a progress bar.
    Say("received %s; stopping", strsignal(stop_signal_));
  }
  Stop(workers_);
  Stop(shards_);
  CheckShardExits();
  if (ExitCode() == 0) {
    if (absl::Status s = Summarise(absl::Now() - start); !s.ok()) {
      Say("%s", s.message());
      failed_ = true;
      only_usage_failures_ = false;
    }
  }
  KeepDashboardUp();
  Stop(dashboard_);
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
  std::printf("gradwire local: %d shards, %d workers; logs in %s\n",
              options.shards, options.workers, dir.c_str());
  std::fflush(stdout);
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
