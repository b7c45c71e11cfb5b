// The dashboard's flags, defined once for `gradwire local` and `gradwire
// run`: --dashboard, --dashboard-port, --dashboard-linger-seconds,
// --prometheus and --dashboard-consoles, each with the same name, default
// and meaning in both (dashboard_options.h checks their values).
//
// Thread safety: for main() only (Abseil's flags are global; a refusal
// exits the process).
#ifndef GRADWIRE_CLI_DASHBOARD_FLAGS_H_
#define GRADWIRE_CLI_DASHBOARD_FLAGS_H_

#include <functional>

#include "absl/strings/string_view.h"
#include "cli/dashboard.h"

namespace gradwire::cli {

// The dashboard that the parsed flags ask for. `given(name)` says whether
// the command line set the flag of Abseil name `name`. A bad value is a
// usage error of `command` ("local", "run"; UsageError in command_args.h:
// the message on stderr, exit code 2). The console templates are, unless
// --dashboard-consoles names them, the first of
// <binary's dir>/../share/gradwire/consoles,
// <binary's dir>/../../deploy/prometheus/consoles and the source tree's
// deploy/prometheus/consoles that holds them.
DashboardOptions DashboardOptionsOrExit(
    absl::string_view command,
    const std::function<bool(absl::string_view)>& given);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_DASHBOARD_FLAGS_H_
