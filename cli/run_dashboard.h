// The dashboard of a run (`gradwire local --dashboard`, `gradwire run
// --dashboard`) from start to stop: Prometheus (dashboard.h) as a
// supervised member of the run.
//
// Sequence: Start, once the shards serve and before the workers, writes the
// configuration with the shards' /metrics as static targets and an empty
// workers' targets file, starts Prometheus, waits until it is ready and
// prints its URL. AddWorker adds each worker's /metrics as its port appears
// (Prometheus watches the file). After the run, Linger keeps it up for
// options.linger so that the last points can be seen; Stop ends it like
// the run's other members (SIGTERM, the grace period, SIGKILL).
//
// Failures: Prometheus exiting or not ready within the start timeout is
// reported to the supervision with the tail of prometheus.log and fails
// Start; an exit while the workers run is reported by CheckRunning. Both
// are failures of the run. A targets file that cannot be written only
// costs the dashboard that worker: it is said, and the run goes on.
//
// Thread safety: none; use it from the thread of its Supervision.
#ifndef GRADWIRE_CLI_RUN_DASHBOARD_H_
#define GRADWIRE_CLI_RUN_DASHBOARD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/dashboard.h"
#include "cli/run_directory.h"
#include "cli/supervision.h"

namespace gradwire::cli {

class RunDashboard {
 public:
  // `options` (enabled or not), `run` and `supervision` must outlive this.
  RunDashboard(const DashboardOptions& options, const RunDirectory& run,
               Supervision& supervision)
      : options_(options), run_(run), supervision_(supervision) {}

  // Starts Prometheus on options.port (0: a free one) scraping
  // `shard_targets` ("host:port" of each shard's /metrics; empty: no
  // shard), removing an earlier run's storage first, and waits up to
  // `timeout` until it is ready; then informs of the URL. Errors: the
  // files or the process could not be made (UNAVAILABLE, INTERNAL, ...,
  // not reported); Prometheus exited (UNAVAILABLE) or was not ready in time
  // (DEADLINE_EXCEEDED), both reported; a stop signal came (CANCELLED, not
  // reported). Call once, with options.enabled.
  absl::Status Start(const std::vector<std::string>& shard_targets,
                     absl::Duration timeout);

  // Whether Start succeeded: the dashboard is up at port().
  bool ready() const { return port_ != 0; }
  int port() const { return port_; }

  // Adds 127.0.0.1:`metrics_port`, a worker's /metrics, to the targets. A
  // no-op unless ready().
  void AddWorker(int metrics_port);

  // Reports Prometheus as a failure if it has exited since Start ("prometheus
  // exited with code N <when>").
  void CheckRunning(absl::string_view when);

  // After the run: unless a stop signal has come, waits options.linger
  // while Prometheus runs, saying so with the URL; a stop signal ends the
  // wait without becoming the run's. A no-op unless ready().
  void Linger();

  // Stops Prometheus (Supervision::Stop); a no-op when it never started.
  void Stop();

 private:
  absl::Status WriteConfiguration(const std::vector<std::string>& targets);
  absl::Status WaitUntilReady(int port, absl::Duration timeout);

  // Constant after construction.
  const DashboardOptions& options_;
  const RunDirectory& run_;
  Supervision& supervision_;
  // Prometheus, once spawned (at most one member); its port once it is
  // ready; the workers' /metrics it was told to scrape.
  std::vector<Member> prometheus_;
  int port_ = 0;
  std::vector<std::string> worker_targets_;
};

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_DASHBOARD_H_
