// `gradwire run`: a user's training command as W workers, with shards.
//
// Across hosts (nnodes > 0), one gradwire run per node, as torchrun: node
// 0 starts the shards on every interface at master_port+1 ...
// master_port+S, and every node (node 0 too) gives its workers those ports
// on master_addr (NodeShardAddresses, run_arguments.h), waiting for them as
// for joined shards. The W workers of a node form its local group
// (worker/local_group.h) around a store on a free loopback port, and the
// node is one gradwire worker of nnodes: the shards count nodes, and a node
// that disagrees on nnodes or the shards is refused by the shards when its
// workers connect (their TrainingConfig names both). Node 0 stops its
// shards only once no byte has moved through them for a few seconds after
// its own workers ended, so that the other nodes can pull their last
// weights.
//
// Sequence: the shards start on 127.0.0.1 exactly as `gradwire local`
// starts them (local_shards.h), or, with shard_addresses, the running
// shards there are asked for their health until each serves (within
// start_timeout). Then W copies of the command start, argv untouched, each
// with the environment contract of run_environment.h (RANK=i, ...), each in
// its own process group. Their output is relayed line by line behind their
// rank (worker_output.h) and kept in <run dir>/worker-<i>.log. This
// process's own messages go to stderr, so that its stdout carries only the
// workers' stdout.
//
// The end: when every worker has exited 0, the shards started here get
// SIGTERM, and the run is summed up: from the workers' summaries when each
// wrote one to GRADWIRE_SUMMARY_JSON (the report of `gradwire local`,
// cluster_summary.h), otherwise from the shards' /metrics, scraped before
// they are stopped (shard_metrics_summary.h); joined shards are neither
// stopped nor scraped. When a worker fails, the other workers get SIGTERM,
// then the shards. When SIGINT, SIGTERM or SIGHUP arrives, that signal goes
// to the workers, then SIGTERM to the shards. Each group has the grace
// period before SIGKILL; a second stop signal cuts it short.
//
// With the dashboard (run_dashboard.h), Prometheus starts once the shards
// serve, before the workers, as in `gradwire local`; each worker's /metrics
// joins it when its port file appears, and the workers keep /metrics up
// kDashboardWorkerLingerSeconds after training
// (GRADWIRE_METRICS_LINGER_SECONDS), so that their last counts are
// scraped. After the summary it stays up for dashboard.linger, or until a
// stop signal. Its failure to start or a later exit fails the run (1).
//
// Exit code: 0 when every worker exited 0 (and the shards started here
// stopped cleanly); the exit code of the first worker that failed (128 + N
// for a worker killed by signal N); 128 + N when this process was stopped
// by signal N; 1 for any other failure (a shard that did not start or
// died, joined shards that did not answer).
#ifndef GRADWIRE_CLI_RUN_JOB_H_
#define GRADWIRE_CLI_RUN_JOB_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/dashboard.h"
#include "cli/local_transport.h"
#include "common/tls/transport_security.h"

namespace gradwire::cli {

struct RunJobOptions {
  // Workers on this node.
  int workers = 1;
  // Across hosts: the number of nodes (0: not given; every worker is then a
  // gradwire worker of its own on this host), this node's rank, and node
  // 0's address and the port left to the job's rank 0 (MASTER_ADDR,
  // MASTER_PORT; 127.0.0.1 and a free port on one host).
  int nnodes = 0;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // The shards as the workers address them, when they are started here on
  // fixed ports for other nodes too; empty: 127.0.0.1:<port>.
  std::vector<std::string> advertised_shards;
  // The worker command as the user wrote it (argv[0] too), and the file
  // that runs it (FindExecutable of argv[0]).
  std::vector<std::string> command;
  std::string program;
  // Shards to start here (>= 1) when shard_addresses is empty.
  int shards = 1;
  // "host:port" of running shards to join, in shard-id order; empty: start
  // `shards` shards.
  std::vector<std::string> shard_addresses;
  // For shards started here: flags added to each gradwire-server, and the
  // root of their checkpoints (shard i: <checkpoint_dir>/shard-<i>; empty:
  // none). See LocalClusterOptions.
  std::vector<std::string> server_args;
  std::string checkpoint_dir;
  // For shards started here: the address they bind and shard 0's port
  // (0: ports the OS picks).
  std::string shard_bind_address = "127.0.0.1";
  int first_shard_port = 0;
  // The run directory, absolute (created if missing, kept). Empty: a fresh
  // one under $TMPDIR (or /tmp), removed after a successful run unless
  // keep_logs.
  std::string run_dir;
  bool keep_logs = false;
  absl::Duration grace = absl::Seconds(10);
  absl::Duration start_timeout = absl::Seconds(60);
  // The directory holding gradwire-server (shards started here only).
  std::string bin_dir;
  // transport.shard: the shards' TLS and token flags (shards started here
  // only). transport.worker: what the workers get in GRADWIRE_TLS_* and
  // GRADWIRE_AUTH_TOKEN_FILE (absolute paths). health_transport: the
  // workers' side, loaded, for the health checks.
  LocalTransport transport;
  TransportSecurity health_transport;
  // The Prometheus dashboard; off by default. It scrapes the shards started
  // here and this node's workers (the metrics ports of other shards are
  // not known here), and the workers get GRADWIRE_METRICS_LINGER_SECONDS.
  DashboardOptions dashboard;
};

// Runs the job to the end and returns the exit code for the process.
// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and takes them
// synchronously; call it from the main thread before any other thread
// starts. `options` must be valid (workers >= 1, command and program set,
// shards >= 1 or shard_addresses set, bin_dir set for shards started here).
int RunJob(const RunJobOptions& options);

// The number of gradwire workers the shards count: the nodes across hosts,
// else the workers.
int GradwireWorkers(const RunJobOptions& options);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_JOB_H_
