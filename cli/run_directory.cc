#include "cli/run_directory.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gradwire::cli {

std::string RunDirectory::Path(absl::string_view name) const {
  return absl::StrCat(dir_, "/", name);
}

std::string RunDirectory::ShardLog(int shard) const {
  return Path(absl::StrCat("shard-", shard, ".log"));
}

std::string RunDirectory::ShardPortFile(int shard) const {
  return Path(absl::StrCat("shard-", shard, ".port"));
}

std::string RunDirectory::ShardMetricsPortFile(int shard) const {
  return Path(absl::StrCat("shard-", shard, ".metrics-port"));
}

std::string RunDirectory::WorkerLog(int worker) const {
  return Path(absl::StrCat("worker-", worker, ".log"));
}

std::string RunDirectory::WorkerSummary(int worker) const {
  return Path(absl::StrCat("worker-", worker, ".json"));
}

std::string RunDirectory::WorkerMetricsPortFile(int worker) const {
  return Path(absl::StrCat("worker-", worker, ".metrics-port"));
}

std::string RunDirectory::PrometheusConfig() const {
  return Path("prometheus.yml");
}

std::string RunDirectory::PrometheusWorkerTargets() const {
  return Path("prometheus-workers.json");
}

std::string RunDirectory::PrometheusLog() const {
  return Path("prometheus.log");
}

std::string RunDirectory::PrometheusData() const {
  return Path("prometheus-data");
}

absl::StatusOr<std::pair<RunDirectory, bool>> MakeRunDirectory(
    const std::string& log_dir, bool keep_logs, absl::string_view flag,
    absl::string_view temp_prefix) {
  if (!log_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(log_dir, error);
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          "cannot create ", flag, " ", log_dir, ": ", error.message()));
    }
    return std::make_pair(RunDirectory(log_dir), false);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/",
                   temp_prefix, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", pattern));
  }
  return std::make_pair(RunDirectory(pattern), !keep_logs);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int PortFromFile(const std::string& path) {
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &port)) {
    return 0;
  }
  return port;
}

std::string MetricsUrl(int port) {
  return absl::StrCat("http://127.0.0.1:", port, "/metrics");
}

}  // namespace gradwire::cli
