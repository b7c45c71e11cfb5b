#include "cli/run_split.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cli/command_args.h"

namespace gradwire::cli {
namespace {

constexpr char kCommand[] = "run";

// gradwire run's own options: those run_command.cc defines and those it
// shares with `gradwire local` (the dashboard's: dashboard_flags.h) and
// `gradwire health`.
constexpr absl::string_view kRunFlags[] = {"workers",
                                           "nnodes",
                                           "node_rank",
                                           "master_addr",
                                           "master_port",
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
                                           "allow_insecure_token",
                                           "dashboard",
                                           "dashboard_port",
                                           "dashboard_linger_seconds",
                                           "prometheus",
                                           "dashboard_consoles"};
constexpr absl::string_view kRunBoolFlags[] = {
    "keep_logs", "allow_insecure_token", "dashboard"};

// Whether `name` is "no" before one of gradwire run's boolean flags.
bool IsNegatedBool(const std::string& name) {
  return absl::StartsWith(name, "no") &&
         Contains(kRunBoolFlags, name.substr(2));
}

// The name of gradwire run's own flag `arg` (`as_given` is how the command
// line spelled it); exits with a usage error for anything else.
std::string OwnFlagNameOrExit(const std::string& arg,
                              const std::string& as_given) {
  const std::string name = FlagName(arg);
  if (name.empty()) {
    UsageError(kCommand, absl::StrCat("'", arg,
                                      "' comes before --: the worker "
                                      "command goes after it (gradwire run "
                                      "-n 2 -- CMD ARGS...)"));
  }
  if (!Contains(kRunFlags, name) && !IsNegatedBool(name)) {
    UsageError(kCommand,
               absl::StrCat("unknown option ", as_given,
                            " (the worker command and its flags go after "
                            "--)"));
  }
  return name;
}

// Adds the flag args[*i] (spelled `arg`, named `name`) to split->own and
// split->given, taking its value from the next argument when it has none
// (then *i moves past it). Returns the value ("" for a boolean without one).
std::string TakeOwnFlag(const std::vector<std::string>& args,
                        const std::string& arg, const std::string& name,
                        size_t* i, RunArgumentSplit* split) {
  const bool negated_bool = IsNegatedBool(name);
  split->given.insert(negated_bool ? name.substr(2) : name);
  const size_t equals = arg.find('=');
  if (equals != std::string::npos) {
    split->own.push_back(arg);
    return arg.substr(equals + 1);
  }
  if (negated_bool || Contains(kRunBoolFlags, name)) {
    split->own.push_back(arg);
    return "";
  }
  if (*i + 1 == args.size()) {
    UsageError(kCommand, absl::StrCat("missing value for ", args[*i]));
  }
  std::string value = args[++*i];
  split->own.push_back(absl::StrCat(arg, "=", value));
  return value;
}

// Exits with a usage error unless "--" and a worker command followed.
void CheckWorkerCommandOrExit(bool dashes, const RunArgumentSplit& split) {
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
}

}  // namespace

RunArgumentSplit SplitRunArguments(const std::vector<std::string>& args) {
  RunArgumentSplit split;
  bool dashes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      split.command.assign(args.begin() + i + 1, args.end());
      dashes = true;
      break;
    }
    std::string arg = args[i];
    if (arg == "-n" || absl::StartsWith(arg, "-n=")) {
      arg = absl::StrCat("--workers", arg.substr(2));
    }
    // torchrun's spelling of -n.
    for (absl::string_view nproc : {"--nproc-per-node", "--nproc_per_node"}) {
      if (absl::StartsWith(arg, nproc) &&
          (arg.size() == nproc.size() || arg[nproc.size()] == '=')) {
        arg = absl::StrCat("--workers", arg.substr(nproc.size()));
      }
    }
    const std::string name = OwnFlagNameOrExit(arg, args[i]);
    const std::string value = TakeOwnFlag(args, arg, name, &i, &split);
    int64_t count = 0;
    if (name == "workers" && !absl::SimpleAtoi(value, &count)) {
      UsageError(kCommand,
                 absl::StrCat("-n: '", value, "' is not a number of workers"));
    }
  }
  CheckWorkerCommandOrExit(dashes, split);
  return split;
}

}  // namespace gradwire::cli
