#include "cli/run_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_args.h"
#include "cli/local_transport.h"
#include "cli/run_arguments.h"
#include "cli/run_job.h"
#include "common/flags/tls_flags.h"
#include "common/process/child_process.h"
#include "common/tls/transport_security.h"

// `gradwire run`'s own flags. It shares --workers (its -n), --shards,
// --keep-logs, --grace-seconds, --start-timeout-seconds, --server-args,
// --checkpoint-dir and --tls-dir with `gradwire local` (local_command.cc),
// and the client TLS flags with `gradwire health` (common/flags).
ABSL_FLAG(std::string, shard_addresses, "",
          "gradwire run: HOST:PORT,... of running shards to join instead of "
          "starting shards.");
ABSL_FLAG(std::string, run_dir, "",
          "gradwire run: the run directory (logs, port files, worker "
          "summaries; kept). Empty: a temporary one, removed after a "
          "successful run.");
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

constexpr absl::string_view kRunFlags[] = {"workers",
                                           "shards",
                                           "shard_addresses",
                                           "run_dir",
                                           "keep_logs",
                                           "grace_seconds",
                                           "start_timeout_seconds",
                                           "server_args",
                                           "checkpoint_dir",
                                           "tls_dir",
                                           "auth_token_file",
                                           "tls_ca",
                                           "tls_cert",
                                           "tls_key",
                                           "tls_server_name",
                                           "allow_insecure_token"};
constexpr absl::string_view kRunBoolFlags[] = {"keep_logs",
                                               "allow_insecure_token"};
// Flags for shards that gradwire run starts, meaningless when joining.
constexpr absl::string_view kStartedShardFlags[] = {"shards", "server_args",
                                                    "checkpoint_dir"};
// Client TLS files given one by one: for joined shards only (shards
// started here take theirs from --tls-dir).
constexpr absl::string_view kClientFileFlags[] = {"tls_ca", "tls_cert",
                                                  "tls_key"};

constexpr int kMaxProcesses = 256;

// --flag names as the user spells them.
std::string Dashed(absl::string_view name) {
  std::string dashed = absl::StrCat("--", name);
  for (char& c : dashed) {
    if (c == '_') c = '-';
  }
  return dashed;
}

// gradwire run's arguments: its own flags (-n as --workers) for Abseil,
// the names given, and the worker command after "--".
struct SplitArguments {
  std::vector<std::string> own;
  std::set<std::string> given;
  std::vector<std::string> command;
};

SplitArguments SplitRunArguments(const std::vector<std::string>& args) {
  SplitArguments split;
  bool dashes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") {
      split.command.assign(args.begin() + i + 1, args.end());
      dashes = true;
      break;
    }
    if (arg == "-n" || absl::StartsWith(arg, "-n=")) {
      arg = absl::StrCat("--workers", arg.substr(2));
    }
    const std::string name = FlagName(arg);
    if (name.empty()) {
      UsageError(kCommand, absl::StrCat("'", arg,
                                        "' comes before --: the worker "
                                        "command goes after it (gradwire run "
                                        "-n 2 -- CMD ARGS...)"));
    }
    if (name == "dashboard") {
      UsageError(kCommand,
                 "--dashboard is not supported by gradwire run (use gradwire "
                 "local --dashboard, or point Prometheus at the shards' "
                 "/metrics URLs it prints)");
    }
    const bool negated_bool =
        absl::StartsWith(name, "no") && Contains(kRunBoolFlags, name.substr(2));
    if (!Contains(kRunFlags, name) && !negated_bool) {
      UsageError(kCommand,
                 absl::StrCat("unknown option ", args[i],
                              " (the worker command and its flags go after "
                              "--)"));
    }
    split.given.insert(negated_bool ? name.substr(2) : name);
    const size_t equals = arg.find('=');
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      split.own.push_back(arg);
    } else if (negated_bool || Contains(kRunBoolFlags, name)) {
      split.own.push_back(arg);
    } else {
      if (i + 1 == args.size()) {
        UsageError(kCommand, absl::StrCat("missing value for ", args[i]));
      }
      value = args[++i];
      split.own.push_back(absl::StrCat(arg, "=", value));
    }
    int64_t count = 0;
    if (name == "workers" && !absl::SimpleAtoi(value, &count)) {
      UsageError(kCommand,
                 absl::StrCat("-n: '", value, "' is not a number of workers"));
    }
  }
  if (!dashes) {
    UsageError(kCommand,
               "missing -- before the worker command (gradwire run -n 2 -- "
               "CMD ARGS...)");
  }
  if (split.command.empty()) {
    UsageError(kCommand,
               "no worker command after -- (gradwire run -n 2 -- "
               "CMD ARGS...)");
  }
  return split;
}

int CountOrExit(int64_t value, absl::string_view option) {
  if (value < 1 || value > kMaxProcesses) {
    UsageError(kCommand, absl::StrCat(option, ": ", value, " is outside [1, ",
                                      kMaxProcesses, "]"));
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
          ? LoadLocalTransport(o.transport)
          : LoadTransportSecurity(o.transport.worker, TransportRole::kClient);
  if (!health.ok()) UsageError(kCommand, health.status().message());
  o.health_transport = *std::move(health);
  if (!o.shard_addresses.empty()) o.transport.shard = {};
  // The workers may change directory: they get absolute paths.
  TransportSecurityFiles& w = o.transport.worker;
  for (std::string* path :
       {&w.tls_ca, &w.tls_cert, &w.tls_key, &w.auth_token_file}) {
    *path = Absolute(*path);
  }
}

RunJobOptions RunOptionsOrExit(const std::vector<std::string>& args) {
  SplitArguments split = SplitRunArguments(args);
  ParseOwnFlags(kCommand, split.own);
  RunJobOptions o;
  if (!split.given.count("workers")) {
    UsageError(kCommand, "-n WORKERS is required");
  }
  o.workers = CountOrExit(absl::GetFlag(FLAGS_workers), "-n");
  ShardsOrExit(split.given, o);
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

std::string RunHelp() {
  return absl::StrFormat(
      R"(gradwire run: runs a training command as W workers, with gradwire shards.

  gradwire run -n 2 -- python3 train.py --epochs 3
  gradwire run -n 4 --shards 2 --run-dir runs/a -- ./my_trainer
  gradwire run -n 2 --shard-addresses ps-0:7000,ps-1:7000 --tls-ca ca.pem -- python3 train.py

Starts --shards gradwire-server processes on 127.0.0.1 (ports chosen by the
OS, as gradwire local starts them) and waits until they serve; or, with
--shard-addresses, waits until the shards there answer their health check.
Then starts WORKERS copies of CMD ARGS exactly as given: nothing is added to
the command line, and CMD is looked up in PATH. Each line a worker writes
appears here behind its rank ("[0] ", "[1] ", ...) on stdout or stderr, as
the worker wrote it, and in RUN_DIR/worker-<i>.log. gradwire run's own
messages go to stderr.

Each worker i finds in its environment, besides what it inherits:
  GRADWIRE_SHARDS=HOST:PORT,...   the shards, in shard-id order
  RANK=i  WORLD_SIZE=WORKERS  LOCAL_RANK=0  LOCAL_WORLD_SIZE=1
                                  (every worker is a node of its own)
  GRADWIRE_RUN_DIR=RUN_DIR        the run directory, an absolute path
  GRADWIRE_SUMMARY_JSON=RUN_DIR/worker-<i>.json
                                  where the worker MAY write its summary
  GRADWIRE_TLS_CA, GRADWIRE_TLS_CERT, GRADWIRE_TLS_KEY (absolute paths),
  GRADWIRE_TLS_SERVER_NAME, GRADWIRE_AUTH_TOKEN_FILE (an absolute path)
                                  only those in use (--tls-dir, --tls-*,
                                  --auth-token-file); inherited ones that
                                  are not in use are removed
  OMP_NUM_THREADS=CORES/WORKERS (at least 1), PYTHONUNBUFFERED=1
                                  unless already set

SIGINT (Ctrl-C), SIGTERM and SIGHUP are passed on to the workers, then the
shards get SIGTERM; what still runs --grace-seconds later is killed (a second
Ctrl-C kills at once). When a worker fails, the others get SIGTERM.
After a successful run, a summary: gradwire local's report when every worker
wrote its GRADWIRE_SUMMARY_JSON (docs/run.md lists the keys), otherwise the
bytes and steps the shards counted (their /metrics).
--dashboard is not supported here (use gradwire local --dashboard, or scrape
the /metrics URLs printed for the shards).

Exit code: 0 when every worker exited 0; otherwise the exit code of the first
worker that failed (128+N for one killed by signal N); 128+N when gradwire run
was stopped by signal N; 1 when a shard failed or did not serve; 2 for a bad
command line.

Options:
  -n N, --workers=N        workers to start, 1..%d (required)
  --shards=N               shards to start on 127.0.0.1, 1..%d (default 1)
  --shard-addresses=HOST:PORT,...
                           join these running shards (in shard-id order)
                           instead; excludes --shards, --server-args and
                           --checkpoint-dir
  --run-dir=DIR            the run directory, kept (default: a temporary one,
                           removed after a successful run)
  --keep-logs              keep the temporary run directory
  --grace-seconds=S        how long workers, then shards, may take to exit
                           after the stop signal before SIGKILL (default %g)
  --start-timeout-seconds=S
                           how long the shards may take to serve (default %g)
  --server-args="--FLAG ..."
                           flags added to every gradwire-server started here
  --checkpoint-dir=DIR     shard i checkpoints into DIR/shard-i
  --tls-dir=DIR            mutual TLS and a bearer token from the files of
                           scripts/dev-certs.sh DIR (shards started here and
                           workers; or the workers' side for joined shards)
  --auth-token-file=FILE   the bearer token of shards and workers (default
                           with --tls-dir: DIR/auth-token); without TLS
                           it needs --allow-insecure-token
  --tls-ca=FILE, --tls-cert=FILE, --tls-key=FILE
                           with --shard-addresses: the workers' TLS files
  --tls-server-name=NAME   the name to check in the shards' certificates
)",
      kMaxProcesses, kMaxProcesses, absl::GetFlag(FLAGS_grace_seconds),
      absl::GetFlag(FLAGS_start_timeout_seconds));
}

int RunRun(const std::vector<std::string>& args) {
  RunJobOptions options = RunOptionsOrExit(args);
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
