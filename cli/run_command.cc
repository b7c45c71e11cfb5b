#include "cli/run_command.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_args.h"
#include "cli/dashboard_flags.h"
#include "cli/local_transport.h"
#include "cli/loopback_http.h"
#include "cli/run_arguments.h"
#include "cli/run_job.h"
#include "cli/run_split.h"
#include "common/flags/tls_flags.h"
#include "common/process/child_process.h"
#include "common/tls/transport_security.h"

// `gradwire run`'s own flags. It shares --workers (its -n), --shards,
// --keep-logs, --grace-seconds, --start-timeout-seconds, --server-args,
// --checkpoint-dir and --tls-dir with `gradwire local` (local_command.cc),
// the dashboard's with it too (dashboard_flags.h), and the client TLS flags
// with `gradwire health` (common/flags). Each is
// also named in run_split.cc, which lets only those through to Abseil.
ABSL_FLAG(std::string, shard_addresses, "",
          "gradwire run: HOST:PORT,... of running shards to join instead of "
          "starting shards.");
ABSL_FLAG(std::string, run_dir, "",
          "gradwire run: the run directory (logs, port files, worker "
          "summaries; kept). Empty: a temporary one, removed after a "
          "successful run.");
// Across hosts, as torchrun names them (run_job.h).
ABSL_FLAG(int64_t, nnodes, 1,
          "gradwire run: nodes of the job, one gradwire run on each; given, "
          "the workers of a node form its local group.");
ABSL_FLAG(int64_t, node_rank, 0,
          "gradwire run: this node's rank, in [0, --nnodes); node 0 starts "
          "the shards.");
ABSL_FLAG(std::string, master_addr, "",
          "gradwire run: node 0's address as every node reaches it "
          "(required with --nnodes > 1).");
ABSL_FLAG(int64_t, master_port, 29500,
          "gradwire run: MASTER_PORT, left to the job's rank 0 (a script's "
          "own init_process_group); node 0's shards listen on the ports "
          "above it. One host without --nnodes: a free port.");
ABSL_DECLARE_FLAG(int64_t, workers);
ABSL_DECLARE_FLAG(int64_t, shards);
ABSL_DECLARE_FLAG(bool, keep_logs);
ABSL_DECLARE_FLAG(double, grace_seconds);
ABSL_DECLARE_FLAG(double, start_timeout_seconds);
ABSL_DECLARE_FLAG(std::string, server_args);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(std::string, tls_dir);

namespace gradwire::cli {
namespace {

constexpr char kCommand[] = "run";

// Flags for shards that gradwire run starts, meaningless when joining.
constexpr absl::string_view kStartedShardFlags[] = {"shards", "server_args",
                                                    "checkpoint_dir"};
// Client TLS files given one by one: for joined shards only (shards
// started here take theirs from --tls-dir).
constexpr absl::string_view kClientFileFlags[] = {"tls_ca", "tls_cert",
                                                  "tls_key"};

// --flag names as the user spells them.
std::string Dashed(absl::string_view name) {
  std::string dashed = absl::StrCat("--", name);
  for (char& c : dashed) {
    if (c == '_') c = '-';
  }
  return dashed;
}

// A free port on this host for MASTER_PORT (one host, none given), so that
// two runs here do not meet at torchrun's 29500.
int FreePortOrExit() {
  absl::StatusOr<int> port = PickFreeLoopbackPort();
  if (!port.ok()) {
    UsageError(kCommand,
               absl::StrCat("no free port for MASTER_PORT (",
                            port.status().message(), "); give --master-port"));
  }
  return *port;
}

int CountOrExit(int64_t value, absl::string_view option) {
  if (value < 1 || value > kMaxRunProcesses) {
    UsageError(kCommand, absl::StrCat(option, ": ", value, " is outside [1, ",
                                      kMaxRunProcesses, "]"));
  }
  return static_cast<int>(value);
}

// The shards: how many to start, or the addresses to join.
void ShardsOrExit(const std::set<std::string>& given, RunJobOptions& o) {
  o.shards = CountOrExit(absl::GetFlag(FLAGS_shards), "--shards");
  if (!given.count("shard_addresses")) {
    for (absl::string_view name : kClientFileFlags) {
      if (given.count(std::string(name))) {
        UsageError(kCommand,
                   absl::StrCat(Dashed(name),
                                " is for --shard-addresses; shards started "
                                "here take their TLS files from --tls-dir"));
      }
    }
    absl::StatusOr<std::vector<std::string>> server_args =
        SplitServerArgs(absl::GetFlag(FLAGS_server_args));
    if (!server_args.ok()) {
      UsageError(kCommand, absl::StrCat("--server-args: ",
                                        server_args.status().message()));
    }
    o.server_args = *std::move(server_args);
    o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
    return;
  }
  for (absl::string_view name : kStartedShardFlags) {
    if (given.count(std::string(name))) {
      UsageError(kCommand, absl::StrCat(Dashed(name),
                                        " and --shard-addresses exclude each "
                                        "other (joined shards are not started "
                                        "here)"));
    }
  }
  absl::StatusOr<std::vector<std::string>> addresses =
      ParseShardAddresses(absl::GetFlag(FLAGS_shard_addresses));
  if (!addresses.ok()) {
    UsageError(kCommand, absl::StrCat("--shard-addresses: ",
                                      addresses.status().message()));
  }
  o.shard_addresses = *std::move(addresses);
}

// A value of gradwire run's flag `name` that must fit an int.
int IntOrExit(int64_t value, absl::string_view name) {
  if (value < INT32_MIN || value > INT32_MAX) {
    UsageError(kCommand,
               absl::StrCat(Dashed(name), ": ", value, " is out of range"));
  }
  return static_cast<int>(value);
}

// Across hosts (--nnodes): every node finds node 0's shards on fixed ports
// above --master-port on --master-addr (node 0 starts them there, the
// others join them), unless --shard-addresses names running ones. On one
// host: MASTER_ADDR 127.0.0.1 and, unless given, a free MASTER_PORT.
void NodesOrExit(const std::set<std::string>& given, RunJobOptions& o) {
  NodeOptions nodes;
  nodes.nnodes = IntOrExit(absl::GetFlag(FLAGS_nnodes), "nnodes");
  nodes.node_rank = IntOrExit(absl::GetFlag(FLAGS_node_rank), "node_rank");
  nodes.master_addr = absl::GetFlag(FLAGS_master_addr);
  nodes.master_port =
      IntOrExit(absl::GetFlag(FLAGS_master_port), "master_port");
  const bool across = given.count("nnodes") > 0;
  for (const char* name : {"node_rank", "master_addr"}) {
    if (given.count(name) && !across) {
      UsageError(kCommand, absl::StrCat(Dashed(name),
                                        " needs --nnodes (the number of "
                                        "nodes, one gradwire run on each)"));
    }
  }
  const int port_shards = o.shard_addresses.empty() ? o.shards : 0;
  if (absl::Status s = CheckNodeOptions(nodes, port_shards, kMaxRunProcesses);
      !s.ok()) {
    UsageError(kCommand, s.message());
  }
  // One node needs no --master-addr: it is this host.
  if (nodes.master_addr.empty()) nodes.master_addr = o.master_addr;
  o.master_addr = nodes.master_addr;
  o.master_port = nodes.master_port;
  if (!across) {
    if (!given.count("master_port")) o.master_port = FreePortOrExit();
    return;
  }
  o.nnodes = nodes.nnodes;
  o.node_rank = nodes.node_rank;
  if (!o.shard_addresses.empty()) return;
  std::vector<std::string> addresses = NodeShardAddresses(nodes, o.shards);
  if (o.node_rank == 0) {
    o.advertised_shards = std::move(addresses);
    o.shard_bind_address = "0.0.0.0";
    o.first_shard_port = o.master_port + 1;
  } else {
    o.shard_addresses = std::move(addresses);
  }
}

std::string Absolute(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).string();
}

// TLS and token: from --tls-dir (scripts/dev-certs.sh) for both sides, or,
// for joined shards, the client files one by one; --auth-token-file and
// --tls-server-name with either.
void TransportOrExit(const std::set<std::string>& given, RunJobOptions& o) {
  const std::string tls_dir = absl::GetFlag(FLAGS_tls_dir);
  TransportSecurityFiles client = ClientTlsFilesFromFlags();
  if (!tls_dir.empty()) {
    for (absl::string_view name : kClientFileFlags) {
      if (given.count(std::string(name))) {
        UsageError(kCommand, absl::StrCat(Dashed(name),
                                          " and --tls-dir exclude each other"));
      }
    }
  }
  o.transport = LocalTransportFrom(tls_dir, client.auth_token_file,
                                   client.allow_insecure_token);
  if (o.shard_addresses.empty() || !tls_dir.empty()) {
    o.transport.worker.tls_server_name = client.tls_server_name;
  } else {
    o.transport.worker = client;
  }
  absl::StatusOr<TransportSecurity> health =
      o.shard_addresses.empty()
          ? LoadLocalTransport(o.transport, GradwireWorkers(o))
          : LoadTransportSecurity(o.transport.worker, TransportRole::kClient);
  if (!health.ok()) UsageError(kCommand, health.status().message());
  o.health_transport = *std::move(health);
  // Shards started elsewhere may not take per-worker tokens: the workers
  // send the directory's shared token, as the shards' own flags decide.
  // Node 0's shards (--nnodes) are this run's: they do, by node.
  if (given.count("shard_addresses")) {
    o.transport.shard = {};
    o.transport.worker_token_dir.clear();
  }
  // The workers may change directory: they get absolute paths.
  TransportSecurityFiles& w = o.transport.worker;
  for (std::string* path :
       {&w.tls_ca, &w.tls_cert, &w.tls_key, &w.auth_token_file,
        &o.transport.worker_token_dir}) {
    *path = Absolute(*path);
  }
}

RunJobOptions RunOptionsOrExit(const std::vector<std::string>& args) {
  RunArgumentSplit split = SplitRunArguments(args);
  ParseOwnFlags(kCommand, split.own);
  RunJobOptions o;
  if (!split.given.count("workers")) {
    UsageError(kCommand, "-n WORKERS is required");
  }
  o.workers = CountOrExit(absl::GetFlag(FLAGS_workers), "-n");
  ShardsOrExit(split.given, o);
  NodesOrExit(split.given, o);
  const double grace = absl::GetFlag(FLAGS_grace_seconds);
  const double start = absl::GetFlag(FLAGS_start_timeout_seconds);
  if (!(grace >= 0)) UsageError(kCommand, "--grace-seconds must be >= 0");
  if (!(start > 0)) {
    UsageError(kCommand, "--start-timeout-seconds must be > 0");
  }
  o.grace = absl::Seconds(grace);
  o.start_timeout = absl::Seconds(start);
  o.run_dir = Absolute(absl::GetFlag(FLAGS_run_dir));
  o.keep_logs = absl::GetFlag(FLAGS_keep_logs);
  TransportOrExit(split.given, o);
  // With --shard-addresses (and on nodes other than 0) the dashboard
  // scrapes the workers only: see RunJobOptions::dashboard.
  o.dashboard = DashboardOptionsOrExit(kCommand, [&](absl::string_view name) {
    return split.given.count(std::string(name)) > 0;
  });
  absl::StatusOr<std::string> program = FindExecutable(split.command[0]);
  if (!program.ok()) {
    UsageError(kCommand, absl::StrCat("the worker command: ",
                                      program.status().message()));
  }
  o.program = *std::move(program);
  o.command = std::move(split.command);
  return o;
}

}  // namespace

int RunRun(const std::vector<std::string>& args) {
  RunJobOptions options = RunOptionsOrExit(args);
  // Node 0 across hosts starts the shards that the other nodes join.
  if (options.shard_addresses.empty()) {
    absl::StatusOr<std::string> bin_dir = SelfDirectory();
    if (!bin_dir.ok()) {
      absl::FPrintF(stderr, "gradwire run: %s\n", bin_dir.status().ToString());
      return 1;
    }
    const std::string server = absl::StrCat(*bin_dir, "/gradwire-server");
    if (access(server.c_str(), X_OK) != 0) {
      absl::FPrintF(stderr,
                    "gradwire run: %s is missing (build it next to "
                    "gradwire)\n",
                    server);
      return 1;
    }
    options.bin_dir = *std::move(bin_dir);
  }
  return RunJob(options);
}

}  // namespace gradwire::cli
