#include "cli/local_command.h"

#include <unistd.h>

#include <cstdio>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_args.h"
#include "cli/dashboard_flags.h"
#include "cli/local_cluster.h"
#include "cli/local_transport.h"
#include "common/flags/command_line.h"
#include "common/process/child_process.h"
#include "common/tls/transport_security.h"

// `gradwire local`.
ABSL_FLAG(int64_t, shards, 1,
          "Number of shards (gradwire-server processes) to start. Not the "
          "worker's --shards: gradwire local passes the workers the shards' "
          "addresses.");
ABSL_FLAG(int64_t, workers, 1,
          "Number of workers (gradwire-worker processes, or "
          "--worker-command) to start.");
ABSL_FLAG(std::string, summary_json, "",
          "Write the cluster's summary here: the keys of the worker summary "
          "with byte counts summed over workers and steps/wall_seconds the "
          "largest, test_accuracy from worker 0, plus workers, shards and "
          "compression_ratio.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Shard i checkpoints into DIR/shard-i (and resumes from it). "
          "Empty: no checkpoints.");
ABSL_FLAG(std::string, log_dir, "",
          "Run directory for logs, port files and worker summaries (kept). "
          "Empty: a temporary one, removed after a successful run.");
ABSL_FLAG(bool, keep_logs, false,
          "Keep the temporary run directory after a successful run.");
ABSL_FLAG(double, grace_seconds, 10,
          "When stopping, how long workers, then shards, may take to exit "
          "after SIGTERM before SIGKILL.");
ABSL_FLAG(double, start_timeout_seconds, 60,
          "How long the shards may take to start serving.");
ABSL_FLAG(std::string, worker_command, "",
          "Command line that starts each worker instead of gradwire-worker, "
          "split on whitespace (no quoting), e.g. \"/usr/bin/python3 "
          "bench/python/worker.py\". Its first word names an executable "
          "file: a path, or a name looked up in PATH. Each worker's flags "
          "(see above) are appended, as for gradwire-worker. Empty: "
          "gradwire-worker next to gradwire.");
ABSL_FLAG(std::string, server_args, "",
          "Flags added to every gradwire-server's command line, split on "
          "whitespace, e.g. \"--async-pull-deltas=per-worker --wal=true\" "
          "(see gradwire-server --help). Each word must be a --flag; "
          "gradwire local sets the shards' addresses, ports, ids, shard and "
          "worker counts and --checkpoint-dir itself.");
ABSL_FLAG(std::string, tls_dir, "",
          "Directory written by scripts/dev-certs.sh: mutual TLS between "
          "every worker and shard, and its auth-token file as the bearer "
          "token. Empty: plaintext.");

// The dashboard's flags (--dashboard, ...) are dashboard_flags.cc's, shared
// with gradwire run.

// Defined by the client TLS flags (common/flags/tls_flags.h).
ABSL_DECLARE_FLAG(std::string, auth_token_file);
ABSL_DECLARE_FLAG(bool, allow_insecure_token);

namespace gradwire::cli {
namespace {

constexpr absl::string_view kLocalUsage =
    "gradwire local: runs a gradwire job on this machine.\n"
    "\n"
    "  gradwire local --shards=2 --workers=2 --compressor=topk --ratio=0.01 "
    "--epochs=1\n"
    "\n"
    "Starts --shards gradwire-server processes on 127.0.0.1 (ports chosen by "
    "the OS),\nwaits until they serve, then starts --workers gradwire-worker "
    "processes. Worker 0\nshows its progress here; the other processes log "
    "to files in the run directory,\nand a failing one is shown with the end "
    "of its log. Every flag not listed below,\nand everything after a bare "
    "--, goes to each worker unchanged (see\ngradwire-worker --help); "
    "gradwire local sets the workers' --shards, --worker-id,\n--num-workers "
    "and --summary-json itself. Ctrl-C stops all processes.\n"
    "--worker-command=\"CMD ARGS\" starts CMD ARGS instead of gradwire-worker "
    "for\nevery worker, with the same flags appended: --shards=HOST:PORT,...\n"
    "--worker-id=I --num-workers=W --summary-json=FILE "
    "--metrics-address=127.0.0.1\n--metrics-port=0 --metrics-port-file=FILE, "
    "--evaluate=false on workers\n1..W-1, --tls-cert --tls-key --tls-ca (with "
    "--tls-dir), --auth-token-file\n(with --tls-dir or --auth-token-file), "
    "then the worker flags given here. It\nmust write its summary JSON to FILE "
    "and exit 0 (see README.md).\n"
    "--tls-dir=DIR (from scripts/dev-certs.sh DIR) runs the cluster with "
    "mutual TLS and\na bearer token; it sets the --tls-* flags of shards and "
    "workers.\n"
    "--auth-token-file=FILE: every shard requires the token in FILE and every "
    "worker\nsends it (default with --tls-dir: DIR/auth-token). Without "
    "--tls-dir it would\ncross the network in clear: refused unless "
    "--allow-insecure-token, which is\npassed on to shards and workers.\n"
    "--dashboard starts Prometheus too, once the shards serve: it scrapes "
    "every shard\nand worker each second and serves gradwire's console "
    "dashboard, whose URL\n(http://127.0.0.1:PORT/consoles/gradwire.html) "
    "is printed; the workers get\n--metrics-linger-seconds=12 so that their "
    "last counts are scraped. After\ntraining it stays up "
    "--dashboard-linger-seconds. The consoles are looked for in\n"
    "BIN/../share/gradwire/consoles, BIN/../../deploy/prometheus/consoles and "
    "the\nsource tree gradwire was built from (BIN: the directory of this "
    "binary).\n"
    "Exit code: 0 when every process succeeded; 1 when one failed; 2 for a "
    "bad command\nline (also a worker flag the workers reject); 130 after "
    "Ctrl-C.";

constexpr absl::string_view kLocalFlags[] = {"shards",
                                             "workers",
                                             "summary_json",
                                             "checkpoint_dir",
                                             "log_dir",
                                             "keep_logs",
                                             "grace_seconds",
                                             "start_timeout_seconds",
                                             "worker_command",
                                             "server_args",
                                             "tls_dir",
                                             "auth_token_file",
                                             "allow_insecure_token",
                                             "dashboard",
                                             "dashboard_port",
                                             "dashboard_linger_seconds",
                                             "prometheus",
                                             "dashboard_consoles"};
constexpr absl::string_view kLocalBoolFlags[] = {"keep_logs", "dashboard",
                                                 "allow_insecure_token"};
// Worker flags that gradwire local sets for each worker.
constexpr absl::string_view kWorkerFlagsSetByLocal[] = {"worker_id",
                                                        "num_workers"};
// Worker flags that gradwire local derives from --tls-dir.
constexpr absl::string_view kWorkerFlagsSetByTlsDir[] = {
    "tls_cert", "tls_key", "tls_ca", "tls_server_name"};
// Worker flags for several processes per worker node, which gradwire local
// does not start (a worker waiting for its local peers would wait forever).
constexpr absl::string_view kWorkerFlagsNotSupported[] = {
    "local_rank", "local_size", "local_store"};

// Splits `local`'s arguments into its own flags (parsed here) and the rest,
// returned for the workers.
std::vector<std::string> SplitLocalArguments(
    const std::vector<std::string>& args) {
  std::vector<std::string> own, workers;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      workers.insert(workers.end(), args.begin() + i + 1, args.end());
      break;
    }
    std::string name = FlagName(arg);
    const bool negated_bool = absl::StartsWith(name, "no") &&
                              Contains(kLocalBoolFlags, name.substr(2));
    if (Contains(kLocalFlags, name) || negated_bool) {
      own.push_back(arg);
      const bool has_value = arg.find('=') != std::string::npos;
      if (!has_value && !negated_bool && !Contains(kLocalBoolFlags, name)) {
        if (i + 1 == args.size()) {
          UsageError("local", absl::StrCat("missing value for ", arg));
        }
        own.push_back(args[++i]);
      }
    } else if (Contains(kWorkerFlagsSetByLocal, name)) {
      UsageError("local", absl::StrCat(arg, " is set by gradwire local"));
    } else if (Contains(kWorkerFlagsSetByTlsDir, name)) {
      UsageError("local", absl::StrCat(arg,
                                       " is set by gradwire local from "
                                       "--tls-dir (scripts/dev-certs.sh DIR)"));
    } else if (Contains(kWorkerFlagsNotSupported, name)) {
      UsageError("local", absl::StrCat(arg,
                                       " is not supported: gradwire local "
                                       "runs one process per worker"));
    } else {
      workers.push_back(arg);
    }
  }
  ParseOwnFlags("local", std::move(own));
  return workers;
}

// Whether `args` (local's own and the workers') set local's flag `name`
// before a bare --.
bool GivenBeforeDashes(const std::vector<std::string>& args,
                       absl::string_view name) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (FlagName(arg) == name) return true;
  }
  return false;
}

// --worker-command split into words, its first resolved as execvp would;
// empty when the flag was not given.
std::vector<std::string> WorkerCommandOrExit(
    const std::vector<std::string>& args) {
  if (!GivenBeforeDashes(args, "worker_command")) return {};
  const std::string flag = absl::GetFlag(FLAGS_worker_command);
  std::vector<std::string> words =
      absl::StrSplit(flag, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
  if (words.empty()) {
    UsageError("local",
               "--worker-command is empty (give the program that "
               "starts a worker, e.g. --worker-command=\"python3 "
               "train.py\")");
  }
  absl::StatusOr<std::string> program = FindExecutable(words[0]);
  if (!program.ok()) {
    UsageError("local",
               absl::StrCat("--worker-command: ", program.status().message()));
  }
  words[0] = *std::move(program);
  return words;
}

// The words of --server-args; exits with a usage error for one that is not
// a --flag.
std::vector<std::string> ServerArgsOrExit() {
  std::vector<std::string> words =
      absl::StrSplit(absl::GetFlag(FLAGS_server_args),
                     absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
  for (const std::string& word : words) {
    if (!absl::StartsWith(word, "--")) {
      UsageError("local",
                 absl::StrCat("--server-args: \"", word, "\" is not a --flag"));
    }
  }
  return words;
}

LocalClusterOptions LocalOptionsOrExit(const std::vector<std::string>& args) {
  LocalClusterOptions o;
  o.worker_args = SplitLocalArguments(args);
  const int64_t shards = absl::GetFlag(FLAGS_shards);
  const int64_t workers = absl::GetFlag(FLAGS_workers);
  const double grace = absl::GetFlag(FLAGS_grace_seconds);
  const double start = absl::GetFlag(FLAGS_start_timeout_seconds);
  if (shards < 1 || shards > 256) {
    UsageError("local",
               absl::StrCat("--shards: ", shards, " is outside [1, 256]"));
  }
  if (workers < 1 || workers > 256) {
    UsageError("local",
               absl::StrCat("--workers: ", workers, " is outside [1, 256]"));
  }
  if (!(grace >= 0)) UsageError("local", "--grace-seconds must be >= 0");
  if (!(start > 0)) UsageError("local", "--start-timeout-seconds must be > 0");
  o.shards = static_cast<int>(shards);
  o.workers = static_cast<int>(workers);
  o.worker_command = WorkerCommandOrExit(args);
  o.server_args = ServerArgsOrExit();
  o.summary_json = absl::GetFlag(FLAGS_summary_json);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.keep_logs = absl::GetFlag(FLAGS_keep_logs);
  o.grace = absl::Seconds(grace);
  o.start_timeout = absl::Seconds(start);
  o.transport = LocalTransportFrom(absl::GetFlag(FLAGS_tls_dir),
                                   absl::GetFlag(FLAGS_auth_token_file),
                                   absl::GetFlag(FLAGS_allow_insecure_token));
  absl::StatusOr<TransportSecurity> health =
      LoadLocalTransport(o.transport, o.workers);
  if (!health.ok()) UsageError("local", health.status().message());
  o.health_transport = *std::move(health);
  o.dashboard = DashboardOptionsOrExit("local", [&](absl::string_view name) {
    return GivenBeforeDashes(args, name);
  });
  return o;
}

}  // namespace

std::string LocalHelp() { return FlagsHelp(kLocalUsage, kLocalFlags); }

int RunLocal(const std::vector<std::string>& args) {
  LocalClusterOptions options = LocalOptionsOrExit(args);
  absl::StatusOr<std::string> bin_dir = SelfDirectory();
  if (!bin_dir.ok()) {
    absl::FPrintF(stderr, "gradwire local: %s\n", bin_dir.status().ToString());
    return 1;
  }
  std::vector<std::string> binaries = {"gradwire-server"};
  if (options.worker_command.empty()) binaries.push_back("gradwire-worker");
  for (const std::string& binary : binaries) {
    const std::string path = absl::StrCat(*bin_dir, "/", binary);
    if (access(path.c_str(), X_OK) != 0) {
      absl::FPrintF(stderr,
                    "gradwire local: %s is missing (build it next to "
                    "gradwire)\n",
                    path);
      return 1;
    }
  }
  options.bin_dir = *bin_dir;
  return RunLocalCluster(options);
}

}  // namespace gradwire::cli
