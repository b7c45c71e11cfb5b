// The dashboard of `gradwire local --dashboard` and `gradwire run
// --dashboard`: a Prometheus server (Debian's `prometheus`) on a loopback
// port, scraping the shards and workers of the run and serving gradwire's
// console templates (deploy/prometheus/consoles: the pages, and lib/ their
// library) at /consoles/gradwire.html. Its pieces are here; its lifecycle
// in a run is run_dashboard.h's.
//
// Its files live in the run directory (run_directory.h): prometheus.yml,
// prometheus-workers.json (the workers' targets, rewritten as their metrics
// ports appear; Prometheus watches the file), prometheus.log and
// prometheus-data/. The shards are known when Prometheus starts and are
// static targets (none where their metrics ports are not known).
//
// Thread safety: pure functions, except those that touch files or sockets,
// which are safe to call from any thread on distinct paths.
#ifndef GRADWIRE_CLI_DASHBOARD_H_
#define GRADWIRE_CLI_DASHBOARD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/loopback_http.h"
#include "cli/run_directory.h"
#include "common/process/child_process.h"

namespace gradwire::cli {

struct DashboardOptions {
  // Off: no Prometheus, and the workers are not asked to linger.
  bool enabled = false;
  // The prometheus binary, a path that execve can run.
  std::string prometheus;
  // The console templates; their library is <consoles>/lib.
  std::string consoles;
  // Its HTTP port on 127.0.0.1; 0: a free one (PickFreeLoopbackPort in
  // loopback_http.h).
  int port = 0;
  // How long it stays up after the workers have finished.
  absl::Duration linger = absl::Seconds(60);
};

// How often Prometheus scrapes every target.
inline constexpr absl::Duration kDashboardScrapeInterval = absl::Seconds(1);
// What a worker gets as --metrics-linger-seconds (gradwire local) or
// GRADWIRE_METRICS_LINGER_SECONDS (gradwire run) with the dashboard on: it
// keeps /metrics up this long after training, so that its last counts
// (equal to its summary's) reach Prometheus even when training took less
// than a second. Prometheus hands a new target to its scrapers up to 10 s
// after the targets file changes (discovery, then the scrape manager, each
// every 5 s); two scrape intervals more.
inline constexpr int kDashboardWorkerLingerSeconds = 12;

// The console page: "http://127.0.0.1:<port>/consoles/gradwire.html".
std::string DashboardUrl(int port);

// The Prometheus configuration: job gradwire-shard with `shard_targets`
// ("host:port" of each shard's /metrics) as static targets, job
// gradwire-worker from the file-discovery file `worker_targets_file`, both
// every `scrape_interval`.
std::string PrometheusConfig(const std::vector<std::string>& shard_targets,
                             const std::string& worker_targets_file,
                             absl::Duration scrape_interval);

// A file-discovery file (Prometheus file_sd_configs) listing `targets`.
std::string FileDiscoveryTargets(const std::vector<std::string>& targets);

// Writes `text` to `path` through a temporary file in the same directory and
// a rename, so that a reader (Prometheus watching the file) never sees it
// half written. UNAVAILABLE naming the path on failure.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& text);

// Prometheus of the run: listening on 127.0.0.1:`port`, with the run
// directory's configuration, storage and log, and options.consoles.
SpawnOptions PrometheusCommand(const DashboardOptions& options,
                               const RunDirectory& run, int port);

// One GET of http://127.0.0.1:<port>/-/ready within `timeout`: OK when it
// answers 200 (Prometheus has opened its storage and is scraping);
// UNAVAILABLE otherwise, with what happened.
absl::Status CheckPrometheusReady(int port, absl::Duration timeout);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_DASHBOARD_H_
