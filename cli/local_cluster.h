// `gradwire local`: a whole gradwire job on this machine. Starts S shards
// (gradwire-server) and W workers (gradwire-worker, or a command of the
// user's such as a Python training script) as real processes on loopback
// with OS-chosen ports, supervises them to the end, stops all of them on
// failure or on a stop signal, and sums up the run.
//
// Sequence: the shards start (each writes its port to a file in the run
// directory); once every shard answers SERVING on grpc.health.v1, the
// workers start. Worker 0's stdout is this process's stdout (its progress
// bar draws on the terminal); every other output goes to a log file in the
// run directory (shard-<i>.log, worker-<i>.log, worker 0's stderr in
// worker-0.log). When all workers have exited 0 the shards get SIGTERM and
// are waited for. When any process fails, or SIGINT/SIGTERM/SIGHUP arrives,
// the workers get SIGTERM, then the shards, each group with a grace period
// before SIGKILL; a failing process is named with the tail of its log.
//
// With the dashboard (cli/run_dashboard.h), Prometheus starts once the
// shards serve and before the workers, and its URL is printed when it is
// ready; each worker is added to its targets when its metrics port file
// appears. After the workers and shards have stopped (and the summary is
// printed) it stays up for dashboard.linger, or until a stop signal, then
// gets SIGTERM like the others. Its failure to start or a later exit is a
// failure of the run, shown with the tail of prometheus.log.
#ifndef GRADWIRE_CLI_LOCAL_CLUSTER_H_
#define GRADWIRE_CLI_LOCAL_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/dashboard.h"
#include "cli/local_transport.h"
#include "common/tls/transport_security.h"

namespace gradwire::cli {

struct LocalClusterOptions {
  int shards = 1;
  int workers = 1;
  // What starts a worker: the path of an executable (run with execve, no
  // PATH search; see FindExecutable in common/process/child_process.h) and
  // its own first arguments. Empty: <bin_dir>/gradwire-worker. Either way
  // each worker's command line (cluster_commands.h) goes on with the same
  // flags, in this order:
  //   --shards=<host:port,...> --worker-id=<i> --num-workers=<W>
  //   --summary-json=<run dir>/worker-<i>.json --metrics-address=127.0.0.1
  //   --metrics-port=0 --metrics-port-file=<run dir>/worker-<i>.metrics-port
  //   --evaluate=false (workers 1..W-1 only),
  //   --metrics-linger-seconds=12 (with the dashboard only),
  //   TransportFlags(transport.worker), then worker_args.
  // A worker must write its summary (the keys CombineWorkerSummaries
  // requires) to the --summary-json path and exit 0; the metrics port file
  // is optional.
  std::vector<std::string> worker_command;
  // Appended verbatim to every worker's command line, after the flags above
  // (which the caller must not repeat here).
  std::vector<std::string> worker_args;
  // Appended verbatim to every shard's command line, after the flags
  // gradwire local sets (ShardCommand).
  std::vector<std::string> server_args;
  // Where the shards listen: the address they bind and the port of shard 0
  // (shard i: first_shard_port + i; 0: ports the OS picks). gradwire run's
  // node 0 binds every interface on fixed ports, so that other hosts find
  // them (run_job.h).
  std::string shard_bind_address = "127.0.0.1";
  int first_shard_port = 0;
  // The cluster's summary (see cli/cluster_summary.h); empty: none.
  std::string summary_json;
  // Shard i checkpoints into <checkpoint_dir>/shard-<i>; empty: none.
  std::string checkpoint_dir;
  // The run directory (created if missing, never removed). Empty: a fresh
  // directory under $TMPDIR (or /tmp), removed after a successful run unless
  // keep_logs; kept after a failure.
  std::string log_dir;
  bool keep_logs = false;
  // How long a stopped group may take to exit after SIGTERM before SIGKILL.
  absl::Duration grace = absl::Seconds(10);
  // How long the shards may take to serve after starting.
  absl::Duration start_timeout = absl::Seconds(60);
  // The directory holding gradwire-server and gradwire-worker (the latter
  // only needed when worker_command is empty).
  std::string bin_dir;
  // TLS and token flags of the shards and the workers (placed before
  // worker_args), and the workers' settings loaded (LoadLocalTransport) for
  // the health checks. Default: plaintext without a token.
  LocalTransport transport;
  TransportSecurity health_transport;
  // The Prometheus dashboard; off by default.
  DashboardOptions dashboard;
};

// Exit codes of RunLocalCluster besides 0 (every worker finished, the
// shards stopped cleanly and the summary was written).
inline constexpr int kClusterFailedExitCode = 1;
// Every failing worker exited with the usage code (2): a bad worker flag.
inline constexpr int kWorkerUsageExitCode = 2;
// Stopped by a signal: 128 + the signal number (130 for Ctrl-C).

// Runs the cluster to the end and returns the exit code for the process.
// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and takes them
// synchronously; call it from the main thread before any other thread
// starts, so that every later thread inherits the mask.
// Options must be valid (shards, workers >= 1; bin_dir set).
int RunLocalCluster(const LocalClusterOptions& options);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_LOCAL_CLUSTER_H_
