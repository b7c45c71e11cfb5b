#include "cli/cluster_commands.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/flags/tls_flags.h"

namespace gradwire::cli {

SpawnOptions ShardCommand(const LocalClusterOptions& options,
                          const RunDirectory& run, int shard) {
  SpawnOptions spawn;
  spawn.argv = {options.bin_dir + "/gradwire-server",
                "--address=" + options.shard_bind_address,
                absl::StrCat("--port=", options.first_shard_port == 0
                                            ? 0
                                            : options.first_shard_port + shard),
                "--port-file=" + run.ShardPortFile(shard),
                absl::StrCat("--shard-id=", shard),
                absl::StrCat("--num-shards=", options.shards),
                absl::StrCat("--num-workers=", options.workers),
                "--metrics-address=127.0.0.1",
                "--metrics-port=0",
                "--metrics-port-file=" + run.ShardMetricsPortFile(shard)};
  for (std::string& flag : TransportFlags(options.transport.shard)) {
    spawn.argv.push_back(std::move(flag));
  }
  if (!options.checkpoint_dir.empty()) {
    spawn.argv.push_back(absl::StrCat(
        "--checkpoint-dir=", options.checkpoint_dir, "/shard-", shard));
  }
  spawn.argv.insert(spawn.argv.end(), options.server_args.begin(),
                    options.server_args.end());
  // The shards' transport is the run's (the flags above): an inherited
  // GRADWIRE_TLS_CA, say, from an outer job, would otherwise turn on what
  // the flags leave off (common/flags/command_line.h).
  for (absl::string_view name : kServerTlsFlagNames) {
    spawn.unset_env.push_back(
        absl::StrCat("GRADWIRE_", absl::AsciiStrToUpper(name)));
  }
  spawn.stdout_path = spawn.stderr_path = run.ShardLog(shard);
  return spawn;
}

SpawnOptions WorkerCommand(const LocalClusterOptions& options,
                           const RunDirectory& run,
                           const std::string& shard_addresses, int worker,
                           const std::vector<std::string>& extra_env) {
  SpawnOptions spawn;
  // Keep this list and the one in local_cluster.h and README.md equal: a
  // user's worker command must accept every flag.
  spawn.argv =
      options.worker_command.empty()
          ? std::vector<std::string>{options.bin_dir + "/gradwire-worker"}
          : options.worker_command;
  spawn.argv.insert(
      spawn.argv.end(),
      {"--shards=" + shard_addresses, absl::StrCat("--worker-id=", worker),
       absl::StrCat("--num-workers=", options.workers),
       "--summary-json=" + run.WorkerSummary(worker),
       "--metrics-address=127.0.0.1", "--metrics-port=0",
       "--metrics-port-file=" + run.WorkerMetricsPortFile(worker)});
  // Worker 0's accuracy is the cluster's; the others skip the evaluation
  // (a user's --evaluate, which comes later, still wins).
  if (worker > 0) spawn.argv.push_back("--evaluate=false");
  // The dashboard's Prometheus scrapes the worker's last counts after its
  // last step (a user's --metrics-linger-seconds, which comes later, wins).
  if (options.dashboard.enabled) {
    spawn.argv.push_back(absl::StrCat("--metrics-linger-seconds=",
                                      kDashboardWorkerLingerSeconds));
  }
  for (std::string& flag :
       TransportFlags(WorkerTransport(options.transport, worker))) {
    spawn.argv.push_back(std::move(flag));
  }
  spawn.argv.insert(spawn.argv.end(), options.worker_args.begin(),
                    options.worker_args.end());
  spawn.extra_env = extra_env;
  // Worker 0 keeps the terminal for its progress; its errors go to the log
  // too, so that a failure can be shown with the others'.
  spawn.stdout_path = worker == 0 ? "" : run.WorkerLog(worker);
  spawn.stderr_path = run.WorkerLog(worker);
  return spawn;
}

std::vector<std::string> WorkerEnvironment(int workers) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return {};
  cpu_set_t cpus;
  int cores = 1;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) cores = CPU_COUNT(&cpus);
  return {absl::StrCat("OMP_NUM_THREADS=", std::max(1, cores / workers))};
}

}  // namespace gradwire::cli
