// How `gradwire run` splits its command line before Abseil reads any of it:
//
//   gradwire run [OWN OPTIONS...] -- CMD ARGS...
//
// Before the first bare "--" stand only gradwire run's own options; after
// it, the worker command, kept exactly as given (a later "--" and the
// command's own flags included). Only the own options go on to Abseil
// (ParseOwnFlags, command_args.h), so a worker command's flags never meet
// gradwire's, nor Abseil's built-in ones (--help, --flagfile).
//
// Thread safety: for main() only (a refusal exits the process).
#ifndef GRADWIRE_CLI_RUN_SPLIT_H_
#define GRADWIRE_CLI_RUN_SPLIT_H_

#include <set>
#include <string>
#include <vector>

namespace gradwire::cli {

// gradwire run's command line in its three parts.
struct RunArgumentSplit {
  // The own options, one "--name=value" each, or "--name" / "--noname" for
  // a boolean without a value: as the user spelled them (dashes or
  // underscores), except that -n and --nproc-per-node (--nproc_per_node)
  // become --workers. Ready for ParseOwnFlags.
  std::vector<std::string> own;
  // The Abseil name of each own option given ("workers", "run_dir"; a
  // negated boolean under its plain name, "keep_logs" for --nokeep-logs):
  // for the checks that depend on whether an option was given at all.
  std::set<std::string> given;
  // The worker command: every argument after the first "--"; never empty.
  std::vector<std::string> command;
};

// Splits `args`, what follows "run" on the command line.
//
// An option's value is joined by "=" or is the next argument ("-n 2",
// "--run-dir DIR"); the booleans --keep-logs, --allow-insecure-token and
// --dashboard (and their "--no" forms) take the next argument as the
// worker's, not as a value. -n, --nproc-per-node and --nproc_per_node name
// --workers, whose value must be an integer (its range is RunRun's to
// check). The other values are Abseil's to read.
//
// Refused with UsageError("run", MESSAGE) (command_args.h: the message on
// stderr, exit code 2), for:
// - an argument before "--" that is not an option: "'ARG' comes before --:
//   the worker command goes after it (...)";
// - an option that is not gradwire run's: "unknown option ARG (the worker
//   command and its flags go after --)". gradwire run's options include
//   the dashboard's of `gradwire local` (--dashboard, --dashboard-port,
//   --dashboard-linger-seconds, --prometheus, --dashboard-consoles), whose
//   values RunRun checks (dashboard_flags.h);
// - an option that needs a value as the last argument: "missing value for
//   ARG";
// - a number of workers that is not an integer: "-n: 'VALUE' is not a
//   number of workers";
// - no "--": "missing -- before the worker command (...)", or nothing
//   after it: "no worker command after -- (...)".
RunArgumentSplit SplitRunArguments(const std::vector<std::string>& args);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_SPLIT_H_
