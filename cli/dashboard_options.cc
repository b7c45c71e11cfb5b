#include "cli/dashboard_options.h"

#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"

namespace gradwire::cli {
namespace {

// The most a dashboard may linger: a day.
constexpr double kMaxLingerSeconds = 86400;

absl::StatusOr<std::string> ConsolesFrom(const DashboardFlags& flags) {
  if (!flags.consoles.empty()) {
    if (!HasConsoles(flags.consoles)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dashboard-consoles: ", flags.consoles,
                       " holds no gradwire.html and lib/gradwire.lib"));
    }
    return flags.consoles;
  }
  for (const std::string& dir : flags.console_candidates) {
    if (HasConsoles(dir)) return dir;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--dashboard: no console templates in ",
                   absl::StrJoin(flags.console_candidates, ", "),
                   " (give --dashboard-consoles=DIR)"));
}

}  // namespace

bool HasConsoles(const std::string& dir) {
  return access(absl::StrCat(dir, "/gradwire.html").c_str(), R_OK) == 0 &&
         access(absl::StrCat(dir, "/lib/gradwire.lib").c_str(), R_OK) == 0;
}

absl::StatusOr<DashboardOptions> DashboardOptionsFrom(
    const DashboardFlags& flags,
    const std::function<bool(absl::string_view)>& given) {
  DashboardOptions d;
  if (!flags.dashboard) {
    for (absl::string_view name : kDashboardOnlyFlags) {
      if (given(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", absl::StrReplaceAll(name, {{"_", "-"}}),
                         " needs --dashboard"));
      }
    }
    return d;
  }
  if (flags.port < 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dashboard-port: ", flags.port, " is outside [0, 65535]"));
  }
  if (!(flags.linger_seconds >= 0 &&
        flags.linger_seconds <= kMaxLingerSeconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dashboard-linger-seconds: ", flags.linger_seconds,
                     " is outside [0, ", kMaxLingerSeconds, "]"));
  }
  absl::StatusOr<std::string> prometheus = FindExecutable(flags.prometheus);
  if (!prometheus.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dashboard needs Prometheus: ", prometheus.status().message(),
        " (Debian: apt-get install prometheus; or --prometheus=PATH)"));
  }
  absl::StatusOr<std::string> consoles = ConsolesFrom(flags);
  if (!consoles.ok()) return consoles.status();
  d.enabled = true;
  d.prometheus = *std::move(prometheus);
  d.consoles = *std::move(consoles);
  d.port = static_cast<int>(flags.port);
  d.linger = absl::Seconds(flags.linger_seconds);
  return d;
}

}  // namespace gradwire::cli
