#include "cli/run_dashboard.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/loopback_http.h"
#include "common/process/child_process.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kReadyTimeout = absl::Seconds(2);

}  // namespace

absl::Status RunDashboard::WriteConfiguration(
    const std::vector<std::string>& shard_targets) {
  // A reused run directory must not show an earlier run's series.
  std::error_code ignored;
  std::filesystem::remove_all(run_.PrometheusData(), ignored);
  if (absl::Status s = WriteFileAtomically(run_.PrometheusWorkerTargets(),
                                           FileDiscoveryTargets({}));
      !s.ok()) {
    return s;
  }
  return WriteFileAtomically(
      run_.PrometheusConfig(),
      PrometheusConfig(shard_targets, run_.PrometheusWorkerTargets(),
                       kDashboardScrapeInterval));
}

absl::Status RunDashboard::Start(const std::vector<std::string>& shard_targets,
                                 absl::Duration timeout) {
  int port = options_.port;
  if (port == 0) {
    absl::StatusOr<int> free_port = PickFreeLoopbackPort();
    if (!free_port.ok()) return free_port.status();
    port = *free_port;
  }
  if (absl::Status s = WriteConfiguration(shard_targets); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<ChildProcess>> p =
      ChildProcess::Spawn(PrometheusCommand(options_, run_, port));
  if (!p.ok()) return p.status();
  Member m;
  m.name = "prometheus";
  m.log = run_.PrometheusLog();
  m.process = *std::move(p);
  prometheus_.push_back(std::move(m));
  if (absl::Status ready = WaitUntilReady(port, timeout); !ready.ok()) {
    return ready;
  }
  port_ = port;
  supervision_.Inform(absl::StrCat("dashboard at ", DashboardUrl(port),
                                   " (Prometheus log ", prometheus_[0].log,
                                   ")"));
  return absl::OkStatus();
}

absl::Status RunDashboard::WaitUntilReady(int port, absl::Duration timeout) {
  Member& prometheus = prometheus_[0];
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Status ready = CheckPrometheusReady(port, kReadyTimeout);
    if (ready.ok()) return absl::OkStatus();
    if (!prometheus.process->running()) {
      supervision_.ReportFailure(
          prometheus,
          absl::StrCat("exited with code ", *prometheus.process->exit_code(),
                       " while starting"));
      return absl::UnavailableError("the dashboard did not start");
    }
    if (absl::Now() > deadline) {
      supervision_.ReportFailure(
          prometheus,
          absl::StrCat("was not ready within ", absl::FormatDuration(timeout),
                       " (", ready.message(), ")"));
      return absl::DeadlineExceededError("the dashboard did not start");
    }
    if (supervision_.Sleep(kPollInterval)) {
      return absl::CancelledError("stop signal");
    }
  }
}

void RunDashboard::AddWorker(int metrics_port) {
  if (!ready()) return;
  worker_targets_.push_back(absl::StrCat("127.0.0.1:", metrics_port));
  if (absl::Status s =
          WriteFileAtomically(run_.PrometheusWorkerTargets(),
                              FileDiscoveryTargets(worker_targets_));
      !s.ok()) {
    supervision_.Say(absl::StrCat("dashboard: ", s.message()));
  }
}

void RunDashboard::CheckRunning(absl::string_view when) {
  supervision_.ReportUnexpectedExits(prometheus_, when);
}

void RunDashboard::Linger() {
  const absl::Duration linger = options_.linger;
  if (!ready() || supervision_.stop_signal() != 0 ||
      linger <= absl::ZeroDuration() || !prometheus_[0].process->running()) {
    return;
  }
  supervision_.Inform(absl::StrCat("dashboard stays up for ",
                                   absl::FormatDuration(linger), " at ",
                                   DashboardUrl(port_), " (Ctrl-C stops it)"));
  const absl::Time end = absl::Now() + linger;
  while (absl::Now() < end && prometheus_[0].process->running()) {
    if (supervision_.WaitForSignal(
            std::min(absl::Milliseconds(250), end - absl::Now())) != 0) {
      return;
    }
  }
}

void RunDashboard::Stop() { supervision_.Stop(prometheus_); }

}  // namespace gradwire::cli
