// `gradwire run`: its command line, read and checked into RunJobOptions,
// and the run (run_job.h).
//
//   gradwire run -n WORKERS [options] -- CMD ARGS...
//
// Everything before the bare "--" is for gradwire run; everything after it
// is the worker command, which every worker runs exactly as given.
#ifndef GRADWIRE_CLI_RUN_COMMAND_H_
#define GRADWIRE_CLI_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace gradwire::cli {

// The most workers, and the most shards, that gradwire run starts.
inline constexpr int kMaxRunProcesses = 256;

// --help text of `gradwire run`, with the environment contract.
std::string RunHelp();

// Runs `gradwire run` with `args` (what follows "run" on the command line)
// and returns the process's exit code; exits with the usage code (2) for a
// bad command line, naming the option.
int RunRun(const std::vector<std::string>& args);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_COMMAND_H_
