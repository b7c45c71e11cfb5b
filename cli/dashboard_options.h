// The checks of the dashboard's flag values (--dashboard, --dashboard-port,
// --dashboard-linger-seconds, --prometheus, --dashboard-consoles), shared by
// `gradwire local` and `gradwire run`, which define the flags once
// (dashboard_flags.h) and hand their values here: so that the checks can be
// tested without flags.
//
// Thread safety: pure functions (DashboardOptionsFrom looks at files).
#ifndef GRADWIRE_CLI_DASHBOARD_OPTIONS_H_
#define GRADWIRE_CLI_DASHBOARD_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/dashboard.h"

namespace gradwire::cli {

// The Abseil names of the flags that mean something only with --dashboard.
inline constexpr absl::string_view kDashboardOnlyFlags[] = {
    "dashboard_port", "dashboard_linger_seconds", "prometheus",
    "dashboard_consoles"};

// The dashboard's flags as a command line set them, unchecked.
struct DashboardFlags {
  bool dashboard = false;
  int64_t port = 0;
  double linger_seconds = 60;
  // A path, or a name looked up in PATH (FindExecutable).
  std::string prometheus = "prometheus";
  // --dashboard-consoles; empty: the first of console_candidates that holds
  // the consoles.
  std::string consoles;
  std::vector<std::string> console_candidates;
};

// Whether `dir` holds the console templates: gradwire.html and
// lib/gradwire.lib, both readable.
bool HasConsoles(const std::string& dir);

// The dashboard that `flags` ask for. `given(name)` says whether the command
// line set the flag of Abseil name `name`. Without flags.dashboard: options
// with enabled false, the values left unchecked. INVALID_ARGUMENT with a
// message that names the flag, for:
// - a flag of kDashboardOnlyFlags given without --dashboard:
//   "--dashboard-port needs --dashboard";
// - a port outside [0, 65535], a linger outside [0, 86400] (NaN too);
// - no Prometheus: "--dashboard needs Prometheus: ... (Debian: apt-get
//   install prometheus; or --prometheus=PATH)";
// - --dashboard-consoles without the consoles, or, without it, none of the
//   candidates holding them.
// The Prometheus found is a path that execve can run.
absl::StatusOr<DashboardOptions> DashboardOptionsFrom(
    const DashboardFlags& flags,
    const std::function<bool(absl::string_view)>& given);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_DASHBOARD_OPTIONS_H_
