#include "cli/run_environment.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_commands.h"
#include "cli/run_directory.h"

namespace gradwire::cli {
namespace {

// The transport variables and their values in `run`.
std::vector<std::pair<const char*, std::string>> TransportVariables(
    const RunEnvironment& run) {
  const TransportSecurityFiles& t = run.transport;
  return {{kTlsCaVariable, t.tls_ca},
          {kTlsCertVariable, t.tls_cert},
          {kTlsKeyVariable, t.tls_key},
          {kTlsServerNameVariable, t.tls_server_name},
          {kAuthTokenFileVariable, t.auth_token_file},
          {kAllowInsecureTokenVariable, t.allow_insecure_token ? "1" : ""}};
}

}  // namespace

std::vector<std::string> WorkerVariables(const RunEnvironment& run, int rank) {
  std::vector<std::string> env = {
      absl::StrCat(kShardsVariable, "=", absl::StrJoin(run.shards, ",")),
      absl::StrCat(kRankVariable, "=", rank),
      absl::StrCat(kWorldSizeVariable, "=", run.world_size),
      absl::StrCat(kLocalRankVariable, "=0"),
      absl::StrCat(kLocalWorldSizeVariable, "=1"),
      absl::StrCat(kRunDirVariable, "=", run.run_dir),
      absl::StrCat(kSummaryJsonVariable, "=",
                   RunDirectory(run.run_dir).WorkerSummary(rank))};
  for (const auto& [name, value] : TransportVariables(run)) {
    if (!value.empty()) env.push_back(absl::StrCat(name, "=", value));
  }
  if (std::getenv(kMetricsPortVariable) == nullptr) {
    env.push_back(absl::StrCat(kMetricsPortVariable, "=0"));
  }
  if (std::getenv(kMetricsAddressVariable) == nullptr) {
    env.push_back(absl::StrCat(kMetricsAddressVariable, "=127.0.0.1"));
  }
  env.push_back(
      absl::StrCat(kMetricsPortFileVariable, "=",
                   RunDirectory(run.run_dir).WorkerMetricsPortFile(rank)));
  for (std::string& omp : WorkerEnvironment(run.world_size)) {
    env.push_back(std::move(omp));
  }
  if (std::getenv("PYTHONUNBUFFERED") == nullptr) {
    env.push_back("PYTHONUNBUFFERED=1");
  }
  return env;
}

std::vector<std::string> UnsetTransportVariables(const RunEnvironment& run) {
  std::vector<std::string> unset;
  for (const auto& [name, value] : TransportVariables(run)) {
    if (value.empty()) unset.push_back(name);
  }
  return unset;
}

}  // namespace gradwire::cli
