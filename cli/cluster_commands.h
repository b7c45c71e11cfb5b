// The command lines `gradwire local` starts its processes with (and
// `gradwire run` its shards): each shard (gradwire-server) on loopback
// with OS-chosen ports, and each worker (gradwire-worker, or the user's
// --worker-command) with the shards' addresses and its own files in the
// run directory. LocalClusterOptions
// (local_cluster.h) documents the workers' flags; keep the three lists, and
// README.md's, equal.
//
// Thread safety: pure functions (WorkerThreads reads the CPU affinity).
#ifndef GRADWIRE_CLI_CLUSTER_COMMANDS_H_
#define GRADWIRE_CLI_CLUSTER_COMMANDS_H_

#include <string>
#include <vector>

#include "cli/local_cluster.h"
#include "cli/run_directory.h"
#include "common/process/child_process.h"

namespace gradwire::cli {

// Shard `shard` of the cluster: gradwire-server from options.bin_dir on
// options.shard_bind_address and first_shard_port (+ shard), its
// port and metrics port written to the run directory, its output to its
// log, with the shards' transport flags and options.checkpoint_dir's
// subdirectory shard-<i> if set. The environment variables of the server's
// TLS and token flags (GRADWIRE_TLS_CA, ...) are not passed on: the flags
// alone set the transport.
SpawnOptions ShardCommand(const LocalClusterOptions& options,
                          const RunDirectory& run, int shard);

// Worker `worker` of the cluster, connecting to `shard_addresses`
// ("host:port,..."). Worker 0 keeps the terminal for its progress (stdout
// inherited, stderr to its log); the others log everything. `extra_env`
// goes to SpawnOptions::extra_env.
SpawnOptions WorkerCommand(const LocalClusterOptions& options,
                           const RunDirectory& run,
                           const std::string& shard_addresses, int worker,
                           const std::vector<std::string>& extra_env);

// The environment of every worker: OMP_NUM_THREADS set to the cores this
// process may run on divided among `workers` (at least 1), unless the
// environment sets it already (W workers on C cores would otherwise each
// start C threads).
std::vector<std::string> WorkerEnvironment(int workers);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_CLUSTER_COMMANDS_H_
