#include "cli/dashboard.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gradwire::cli {
namespace {

// `targets` as a YAML flow list of quoted strings.
std::string QuotedList(const std::vector<std::string>& targets) {
  std::vector<std::string> quoted;
  for (const std::string& target : targets) {
    quoted.push_back(absl::StrCat("\"", target, "\""));
  }
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string Seconds(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Seconds(d), "s");
}

}  // namespace

std::string DashboardUrl(int port) {
  return absl::StrCat("http://127.0.0.1:", port, "/consoles/gradwire.html");
}

std::string PrometheusConfig(const std::vector<std::string>& shard_targets,
                             const std::string& worker_targets_file,
                             absl::Duration scrape_interval) {
  // The job names are those of deploy/prometheus/prometheus.yml, so that the
  // consoles work the same on both.
  return absl::StrCat(
      "# Written by gradwire --dashboard for this run.\n"
      "global:\n"
      "  scrape_interval: ",
      Seconds(scrape_interval),
      "\n  scrape_timeout: ", Seconds(scrape_interval),
      "\n"
      "scrape_configs:\n"
      "  - job_name: gradwire-shard\n"
      "    static_configs:\n"
      "      - targets: ",
      QuotedList(shard_targets),
      "\n"
      "  - job_name: gradwire-worker\n"
      "    file_sd_configs:\n"
      "      - files: ",
      QuotedList({worker_targets_file}),
      "\n"
      "        refresh_interval: 5s\n");
}

std::string FileDiscoveryTargets(const std::vector<std::string>& targets) {
  return absl::StrCat("[{\"targets\": [",
                      absl::StrJoin(targets, ", ",
                                    [](std::string* out, const std::string& t) {
                                      absl::StrAppend(out, "\"", t, "\"");
                                    }),
                      "], \"labels\": {}}]\n");
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out.good()) {
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot rename ", temporary, " to ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

SpawnOptions PrometheusCommand(const DashboardOptions& options,
                               const RunDirectory& run, int port) {
  SpawnOptions spawn;
  spawn.argv = {options.prometheus,
                "--config.file=" + run.PrometheusConfig(),
                "--storage.tsdb.path=" + run.PrometheusData(),
                absl::StrCat("--web.listen-address=127.0.0.1:", port),
                "--web.console.templates=" + options.consoles,
                "--web.console.libraries=" + options.consoles + "/lib",
                "--log.level=warn"};
  spawn.stdout_path = spawn.stderr_path = run.PrometheusLog();
  return spawn;
}

absl::Status CheckPrometheusReady(int port, absl::Duration timeout) {
  absl::StatusOr<HttpAnswer> answer =
      HttpGetLoopback(port, "/-/ready", timeout);
  if (!answer.ok()) {
    return absl::UnavailableError(answer.status().message());
  }
  if (answer->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET /-/ready: ", answer->status_line));
  }
  return absl::OkStatus();
}

}  // namespace gradwire::cli
