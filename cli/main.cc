// gradwire: the command-line tool.
//
//   gradwire run -n 2 -- python3 train.py
//       runs a user's training command as 2 workers with shards, through
//       the environment contract (cli/run_job.h, cli/run_environment.h);
//   gradwire local --shards=2 --workers=2 --compressor=topk --ratio=0.01
//       runs a whole job on this machine (cli/local_cluster.h);
//   gradwire health --addr=127.0.0.1:7000
//       exits 0 and prints SERVING when that shard serves (for Docker
//       HEALTHCHECK and scripts), 1 with the status otherwise;
//   gradwire report --out=DIR a.json b.json
//       the table and plots of runs from their summaries
//       (cli/report_command.h, scripts/gradwire_report.py).
//
// Exit codes: 0 success; 1 failure; kUsageExitCode (2) for a bad command
// line; 128 + N when `local` or `run` was stopped by signal N; `run` also
// exits with the code of its first failed worker.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cli/command_args.h"
#include "cli/health_command.h"
#include "cli/local_command.h"
#include "cli/report_command.h"
#include "cli/run_command.h"
#include "common/flags/command_line.h"

// The client TLS flags (common/flags/tls_flags.h) serve both commands:
// --auth-token-file is the token of the shards and workers of `local`, and
// the one `health` sends.

namespace gradwire::cli {
namespace {

constexpr absl::string_view kUsage =
    "gradwire: the gradwire command-line tool.\n"
    "\n"
    "Usage:\n"
    "  gradwire run -n W [--shards=S | --shard-addresses=H:P,...] -- CMD "
    "ARGS...\n"
    "      Runs CMD ARGS as W workers (RANK, WORLD_SIZE, GRADWIRE_SHARDS, ... "
    "in\n"
    "      their environment) with S shards, their output prefixed [rank].\n"
    "  gradwire local --shards=S --workers=W [worker flags...]\n"
    "      Runs S shards and W workers on this machine and sums up the run.\n"
    "  gradwire health --addr=HOST:PORT [--timeout-seconds=5]\n"
    "      Exits 0 and prints SERVING when the shard at HOST:PORT serves.\n"
    "  gradwire report [--out=DIR] [--label=NAME=FILE ...] SUMMARY.json...\n"
    "      Prints a table of the runs and plots accuracy per epoch and\n"
    "      accuracy against bytes (PNG; needs python3-matplotlib).\n"
    "\n"
    "'gradwire COMMAND --help' describes a command's flags.\n";

int Main(int argc, char** argv) {
  if (argc < 2) UsageError("", "no command given");
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  // Help for a command comes before its flags are looked at; a worker
  // flag's --help is not reached (everything after -- is not looked at).
  const bool help = IsHelpRequest(argc, argv);
  if (command == "run") {
    if (help) {
      std::fputs(RunHelp().c_str(), stdout);
      return 0;
    }
    return RunRun(args);
  }
  if (command == "local") {
    if (help) {
      std::fputs(LocalHelp().c_str(), stdout);
      return 0;
    }
    return RunLocal(args);
  }
  if (command == "health") {
    if (help) {
      std::fputs(HealthHelp().c_str(), stdout);
      return 0;
    }
    return RunHealth(args);
  }
  if (command == "report") {
    if (help) {
      std::fputs(ReportHelp().c_str(), stdout);
      return 0;
    }
    return RunReport(args);
  }
  if (help || command == "help") {
    std::fputs(kUsage.data(), stdout);
    return 0;
  }
  UsageError("", absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace gradwire::cli

int main(int argc, char** argv) { return gradwire::cli::Main(argc, argv); }
