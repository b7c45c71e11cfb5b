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

// RANK, WORLD_SIZE, LOCAL_*, MASTER_* and the node's store of worker
// `index` of this node.
std::vector<std::string> PlaceVariables(const RunEnvironment& run, int index) {
  const int node_workers =
      run.node_workers > 0 ? run.node_workers : run.world_size;
  std::vector<std::string> env = {
      absl::StrCat(kRankVariable, "=", run.node_rank * node_workers + index),
      absl::StrCat(kWorldSizeVariable, "=", run.world_size),
      absl::StrCat(kLocalRankVariable, "=", run.local_group ? index : 0),
      absl::StrCat(kLocalWorldSizeVariable, "=",
                   run.local_group ? node_workers : 1),
      absl::StrCat(kMasterAddrVariable, "=", run.master_addr),
      absl::StrCat(kMasterPortVariable, "=", run.master_port)};
  if (!run.local_store.empty()) {
    env.push_back(absl::StrCat(kLocalStoreVariable, "=", run.local_store));
  }
  return env;
}

}  // namespace

std::vector<std::string> WorkerVariables(const RunEnvironment& run, int index) {
  std::vector<std::string> env = PlaceVariables(run, index);
  env.push_back(
      absl::StrCat(kShardsVariable, "=", absl::StrJoin(run.shards, ",")));
  env.push_back(absl::StrCat(kRunDirVariable, "=", run.run_dir));
  env.push_back(absl::StrCat(kSummaryJsonVariable, "=",
                             RunDirectory(run.run_dir).WorkerSummary(index)));
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
                   RunDirectory(run.run_dir).WorkerMetricsPortFile(index)));
  if (run.metrics_linger_seconds > 0 &&
      std::getenv(kMetricsLingerSecondsVariable) == nullptr) {
    env.push_back(absl::StrCat(kMetricsLingerSecondsVariable, "=",
                               run.metrics_linger_seconds));
  }
  // The cores are shared by the workers of this node only.
  for (std::string& omp : WorkerEnvironment(
           run.node_workers > 0 ? run.node_workers : run.world_size)) {
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
