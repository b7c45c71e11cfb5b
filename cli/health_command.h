// `gradwire health`: asks one shard whether it serves (grpc.health.v1), for
// Docker's HEALTHCHECK, Kubernetes probes and scripts.
#ifndef GRADWIRE_CLI_HEALTH_COMMAND_H_
#define GRADWIRE_CLI_HEALTH_COMMAND_H_

#include <string>
#include <vector>

namespace gradwire::cli {

// --help text of `gradwire health`.
std::string HealthHelp();

// Runs `gradwire health` with `args` (what follows "health") and returns
// the exit code: 0 (SERVING printed) when the shard serves, 1 with the
// status otherwise; exits with the usage code for a bad command line.
int RunHealth(const std::vector<std::string>& args);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_HEALTH_COMMAND_H_
