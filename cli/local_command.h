// `gradwire local`: its flags, read and checked into LocalClusterOptions,
// and the run (local_cluster.h). Every argument that is not one of its own
// flags goes to the workers.
#ifndef GRADWIRE_CLI_LOCAL_COMMAND_H_
#define GRADWIRE_CLI_LOCAL_COMMAND_H_

#include <string>
#include <vector>

namespace gradwire::cli {

// --help text of `gradwire local`.
std::string LocalHelp();

// Runs `gradwire local` with `args` (what follows "local" on the command
// line) and returns the process's exit code; exits with the usage code for
// a bad command line.
int RunLocal(const std::vector<std::string>& args);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_LOCAL_COMMAND_H_
