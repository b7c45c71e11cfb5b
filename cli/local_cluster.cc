#include "cli/local_cluster.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/cluster_summary.h"
#include "cli/flat_json.h"
#include "cli/process.h"
#include "worker/health_client.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kHealthTimeout = absl::Seconds(2);
constexpr int kLogTailLines = 15;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename... Args>
void Say(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::fflush(stdout);
  absl::FPrintF(stderr, "gradwire local: %s\n",
                absl::StrFormat(format, args...));
}

// Stop signals, blocked and taken synchronously with sigtimedwait.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      sigaddset(&set_, s);
      // A shell starts background jobs with SIGINT ignored; an ignored
      // signal is discarded instead of queued. Blocked, the default action
      // cannot run.
      signal(s, SIG_DFL);
    }
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }

  // Waits up to `timeout` for a stop signal; its number, or 0.
  int Wait(absl::Duration timeout) const {
    const timespec ts = absl::ToTimespec(timeout);
    for (;;) {
      const int s = sigtimedwait(&set_, nullptr, &ts);
      if (s > 0) return s;
      if (errno != EINTR) return 0;
    }
  }

 private:
  sigset_t set_;
};

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

// The port in a port file once it is complete; 0 before.
int PortFromFile(const std::string& path) {
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &port)) {
    return 0;
  }
  return port;
}

std::string MetricsUrl(int port) {
  return absl::StrCat("http://127.0.0.1:", port, "/metrics");
}

int WorkerThreads(int workers) {
  cpu_set_t cpus;
  int cores = 1;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) cores = CPU_COUNT(&cpus);
  return std::max(1, cores / workers);
}

class LocalCluster {
 public:
  LocalCluster(const LocalClusterOptions& options, std::string run_dir)
      : options_(options), run_dir_(std::move(run_dir)) {}

  int Run();

 private:
  std::string RunPath(absl::string_view name) const {
    return absl::StrCat(run_dir_, "/", name);
  }
  absl::Status StartShards();
  absl::Status WaitUntilServing();
  int ShardPort(int shard) const;
  void ReportWorkerMetrics();
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
  const std::string run_dir_;
  const StopSignals signals_;
  std::vector<Member> shards_;
  std::vector<Member> workers_;
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
  const std::string server = options_.bin_dir + "/gradwire-server";
  for (int i = 0; i < options_.shards; ++i) {
    const std::string port_file = RunPath(absl::StrCat("shard-", i, ".port"));
    std::filesystem::remove(port_file);
    std::filesystem::remove(
        RunPath(absl::StrCat("shard-", i, ".metrics-port")));
    SpawnOptions spawn;
    spawn.argv = {server,
                  "--address=127.0.0.1",
                  "--port=0",
                  "--port-file=" + port_file,
                  absl::StrCat("--shard-id=", i),
                  absl::StrCat("--num-shards=", options_.shards),
                  absl::StrCat("--num-workers=", options_.workers),
                  "--metrics-address=127.0.0.1",
                  "--metrics-port=0",
                  "--metrics-port-file=" +
                      RunPath(absl::StrCat("shard-", i, ".metrics-port"))};
    for (std::string& flag : TransportFlags(options_.transport.shard)) {
      spawn.argv.push_back(std::move(flag));
    }
    if (!options_.checkpoint_dir.empty()) {
      spawn.argv.push_back(absl::StrCat(
          "--checkpoint-dir=", options_.checkpoint_dir, "/shard-", i));
    }
    Member m;
    m.name = absl::StrCat("shard ", i);
    m.log = RunPath(absl::StrCat("shard-", i, ".log"));
    spawn.stdout_path = spawn.stderr_path = m.log;
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(spawn);
    if (!p.ok()) return p.status();
    m.process = std::move(*p);
    shards_.push_back(std::move(m));
  }
  return absl::OkStatus();
}

// The port from shard i's port file, once it is complete; 0 before.
int LocalCluster::ShardPort(int shard) const {
  return PortFromFile(RunPath(absl::StrCat("shard-", shard, ".port")));
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
    const int metrics_port =
        PortFromFile(RunPath(absl::StrCat("shard-", i, ".metrics-port")));
    std::printf(
        "gradwire local: shard %zu serving on %s, metrics at %s (log %s)\n", i,
        addresses_[i].c_str(), MetricsUrl(metrics_port).c_str(),
        shards_[i].log.c_str());
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status LocalCluster::StartWorkers() {
  const std::vector<std::string> command =
      options_.worker_command.empty()
          ? std::vector<std::string>{options_.bin_dir + "/gradwire-worker"}
          : options_.worker_command;
  const std::string shards = absl::StrJoin(addresses_, ",");
  std::vector<std::string> env;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    // W workers on C cores: without this each would start C threads.
    env.push_back(
        absl::StrCat("OMP_NUM_THREADS=", WorkerThreads(options_.workers)));
  }
  for (int i = 0; i < options_.workers; ++i) {
    const std::string summary = RunPath(absl::StrCat("worker-", i, ".json"));
    std::filesystem::remove(summary);
    const std::string metrics_file =
        RunPath(absl::StrCat("worker-", i, ".metrics-port"));
    std::filesystem::remove(metrics_file);
    SpawnOptions spawn;
    // Keep this list and the one in local_cluster.h and README.md equal: a
    // user's worker command must accept every flag.
    spawn.argv = command;
    spawn.argv.insert(
        spawn.argv.end(),
        {"--shards=" + shards, absl::StrCat("--worker-id=", i),
         absl::StrCat("--num-workers=", options_.workers),
         "--summary-json=" + summary, "--metrics-address=127.0.0.1",
         "--metrics-port=0", "--metrics-port-file=" + metrics_file});
    // Worker 0's accuracy is the cluster's; the others skip the evaluation
    // (a user's --evaluate, which comes later, still wins).
    if (i > 0) spawn.argv.push_back("--evaluate=false");
    for (std::string& flag : TransportFlags(options_.transport.worker)) {
      spawn.argv.push_back(std::move(flag));
    }
    spawn.argv.insert(spawn.argv.end(), options_.worker_args.begin(),
                      options_.worker_args.end());
    spawn.extra_env = env;
    Member m;
    m.name = absl::StrCat("worker ", i);
    m.log = RunPath(absl::StrCat("worker-", i, ".log"));
    m.metrics_port_file = metrics_file;
    // Worker 0 keeps the terminal for its progress; its errors go to the log
    // too, so that a failure can be shown with the others'.
    spawn.stdout_path = i == 0 ? "" : m.log;
    spawn.stderr_path = m.log;
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(spawn);
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
  for (Member& s : shards_) {
    if (!s.process->running() && !s.stopping) {
      s.stopping = true;
      ReportFailure(s,
                    absl::StrCat("exited with code ", *s.process->exit_code(),
                                 " while the workers ran"));
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
  std::vector<FlatJson> summaries;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const std::string path = RunPath(absl::StrCat("worker-", i, ".json"));
    absl::StatusOr<FlatJson> summary = ParseFlatJson(ReadFile(path));
    if (!summary.ok()) {
      return absl::DataLossError(
          absl::StrCat("cannot read ", path, ": ", summary.status().message()));
    }
    summaries.push_back(std::move(*summary));
  }
  absl::StatusOr<FlatJson> cluster =
      CombineWorkerSummaries(summaries, options_.shards);
  if (!cluster.ok()) return cluster.status();
  if (!options_.summary_json.empty()) {
    std::ofstream out(options_.summary_json);
    out << FlatJsonToString(*cluster);
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", options_.summary_json));
    }
  }
  std::fputs(ClusterReport(*cluster, elapsed).c_str(), stdout);
  std::fflush(stdout);
  return absl::OkStatus();
}

int LocalCluster::Run() {
  const absl::Time start = absl::Now();
  absl::Status started = StartShards();
  if (started.ok()) started = WaitUntilServing();
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
  return ExitCode();
}

// The run directory; whether to remove it at the end.
absl::StatusOr<std::pair<std::string, bool>> MakeRunDir(
    const LocalClusterOptions& options) {
  if (!options.log_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.log_dir, error);
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          "cannot create --log-dir ", options.log_dir, ": ", error.message()));
    }
    return std::make_pair(options.log_dir, false);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/gradwire-local-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", pattern));
  }
  return std::make_pair(pattern, !options.keep_logs);
}

}  // namespace

int RunLocalCluster(const LocalClusterOptions& options) {
  absl::StatusOr<std::pair<std::string, bool>> run_dir = MakeRunDir(options);
  if (!run_dir.ok()) {
    Say("%s", run_dir.status().message());
    return kClusterFailedExitCode;
  }
  const auto& [dir, remove_after_success] = *run_dir;
  std::printf("gradwire local: %d shards, %d workers; logs in %s\n",
              options.shards, options.workers, dir.c_str());
  std::fflush(stdout);
  int code;
  {
    LocalCluster cluster(options, dir);
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
