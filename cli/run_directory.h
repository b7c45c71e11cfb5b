// The run directory of `gradwire local` and `gradwire run`: where each
// process's log, port files and summary go, by name, so that the code that
// starts a process and the code that reads its files agree.
//
//   <dir>/shard-<i>.log  .port  .metrics-port
//   <dir>/worker-<i>.log .json  .metrics-port
//   <dir>/prometheus.yml  prometheus-workers.json  prometheus.log
//   <dir>/prometheus-data/          (with --dashboard, cli/dashboard.h)
//
// Thread safety: RunDirectory is immutable; the functions read files.
#ifndef GRADWIRE_CLI_RUN_DIRECTORY_H_
#define GRADWIRE_CLI_RUN_DIRECTORY_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire::cli {

class RunDirectory {
 public:
  explicit RunDirectory(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  // <dir>/<name>.
  std::string Path(absl::string_view name) const;

  std::string ShardLog(int shard) const;
  // Where shard i writes its gRPC port once it listens (after its metrics
  // port file).
  std::string ShardPortFile(int shard) const;
  std::string ShardMetricsPortFile(int shard) const;
  // gradwire local: worker 0's stderr only (its stdout is the terminal);
  // gradwire run: every line of the worker's stdout and stderr.
  std::string WorkerLog(int worker) const;
  // The worker's --summary-json (gradwire run: GRADWIRE_SUMMARY_JSON).
  std::string WorkerSummary(int worker) const;
  std::string WorkerMetricsPortFile(int worker) const;
  // The dashboard's Prometheus: its configuration, the workers' targets
  // (file discovery), its log and its storage directory.
  std::string PrometheusConfig() const;
  std::string PrometheusWorkerTargets() const;
  std::string PrometheusLog() const;
  std::string PrometheusData() const;

 private:
  std::string dir_;
};

// The run directory for `log_dir` (created if missing; the caller keeps
// it), or, when empty, a fresh one under $TMPDIR (or /tmp) named
// <temp_prefix>-XXXXXX. The bool: true when the directory is fresh, to be
// removed after a successful run unless `keep_logs`. UNAVAILABLE naming
// `flag` and the directory when it cannot be made.
absl::StatusOr<std::pair<RunDirectory, bool>> MakeRunDirectory(
    const std::string& log_dir, bool keep_logs,
    absl::string_view flag = "--log-dir",
    absl::string_view temp_prefix = "gradwire-local");

// The whole content of a file; empty if it cannot be read.
std::string ReadFile(const std::string& path);

// The port in a port file (common/port_file.h) once it is complete; 0
// before.
int PortFromFile(const std::string& path);

// "http://127.0.0.1:<port>/metrics".
std::string MetricsUrl(int port);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_DIRECTORY_H_
