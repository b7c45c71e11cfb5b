#include "cli/dashboard_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/command_args.h"
#include "cli/dashboard_options.h"
#include "common/process/child_process.h"

ABSL_FLAG(bool, dashboard, false,
          "Also start Prometheus (Debian's prometheus) on 127.0.0.1, scraping "
          "every shard and worker each second and serving gradwire's console "
          "dashboard; its URL is printed.");
ABSL_FLAG(int64_t, dashboard_port, 0,
          "The dashboard's port on 127.0.0.1 (with --dashboard); 0: a free "
          "one.");
ABSL_FLAG(double, dashboard_linger_seconds, 60,
          "With --dashboard: how long the dashboard stays up after training "
          "so that the last points can be seen (Ctrl-C ends it sooner).");
ABSL_FLAG(std::string, prometheus, "prometheus",
          "With --dashboard: the Prometheus binary, a path or a name looked "
          "up in PATH.");
ABSL_FLAG(std::string, dashboard_consoles, "",
          "With --dashboard: the console templates (a directory with "
          "gradwire.html and lib/gradwire.lib). Empty: "
          "deploy/prometheus/consoles of the source tree (see above).");

namespace gradwire::cli {
namespace {

// Where the console templates are looked for, given the directory of the
// running binary: an installed layout, a build tree inside the source tree,
// then the source tree this binary was built from.
std::vector<std::string> ConsoleCandidates(absl::string_view bin_dir) {
  return {absl::StrCat(bin_dir, "/../share/gradwire/consoles"),
          absl::StrCat(bin_dir, "/../../deploy/prometheus/consoles"),
          absl::StrCat(GRADWIRE_SOURCE_DIR, "/deploy/prometheus/consoles")};
}

}  // namespace

DashboardOptions DashboardOptionsOrExit(
    absl::string_view command,
    const std::function<bool(absl::string_view)>& given) {
  DashboardFlags flags;
  flags.dashboard = absl::GetFlag(FLAGS_dashboard);
  flags.port = absl::GetFlag(FLAGS_dashboard_port);
  flags.linger_seconds = absl::GetFlag(FLAGS_dashboard_linger_seconds);
  flags.prometheus = absl::GetFlag(FLAGS_prometheus);
  flags.consoles = absl::GetFlag(FLAGS_dashboard_consoles);
  if (flags.dashboard && flags.consoles.empty()) {
    absl::StatusOr<std::string> bin_dir = SelfDirectory();
    flags.console_candidates = ConsoleCandidates(bin_dir.ok() ? *bin_dir : "");
  }
  absl::StatusOr<DashboardOptions> options = DashboardOptionsFrom(flags, given);
  if (!options.ok()) UsageError(command, options.status().message());
  return *std::move(options);
}

}  // namespace gradwire::cli
