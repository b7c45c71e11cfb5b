// The environment contract of `gradwire run`: what each worker finds in its
// environment, on top of the one it inherits, so that a training script
// learns its place in the job without any argument being added to its
// command line (torchrun's convention; DESIGN.md "The environment
// contract"; docs/run.md).
//
//   GRADWIRE_SHARDS           host:port,host:port,...  the shards, in
//                             shard-id order
//   RANK                      this worker's id, 0..WORLD_SIZE-1:
//                             node_rank * node_workers + its index here
//   WORLD_SIZE                the number of workers on every node together
//   LOCAL_RANK                its index on this node with local_group,
//   LOCAL_WORLD_SIZE          and node_workers; otherwise 0 and 1 (each
//                             worker is a node of its own)
//   MASTER_ADDR, MASTER_PORT  the address of the job's rank 0 and a port
//                             that gradwire leaves free there, as torchrun
//                             sets them (a script's own
//                             init_process_group("gloo") works unchanged)
//   GRADWIRE_LOCAL_STORE      host:port of the node's c10d store for the
//                             local group (worker/local_group.h), when set
//   GRADWIRE_RUN_DIR          the run directory (absolute)
//   GRADWIRE_SUMMARY_JSON     <run dir>/worker-<RANK>.json, where the
//                             worker may write its summary
//   GRADWIRE_TLS_CA           the files of the workers' side of TLS and
//   GRADWIRE_TLS_CERT         the token (absolute paths), and the name to
//   GRADWIRE_TLS_KEY          check in the shards' certificate: each set
//   GRADWIRE_TLS_SERVER_NAME  only when in use, and removed from the
//   GRADWIRE_AUTH_TOKEN_FILE  inherited environment otherwise
//   GRADWIRE_ALLOW_INSECURE_TOKEN  1 when the run sends its token without
//                             TLS (--allow-insecure-token); removed otherwise
//   GRADWIRE_METRICS_PORT     0 and 127.0.0.1, unless inherited: each
//   GRADWIRE_METRICS_ADDRESS  worker serves /metrics on a free loopback
//                             port (Python: python/gradwire/_metrics.py;
//                             gradwire-worker reads them as its
//                             --metrics-port and --metrics-address)
//   GRADWIRE_METRICS_PORT_FILE  <run dir>/worker-<RANK>.metrics-port,
//                             where that port is written
//   GRADWIRE_METRICS_LINGER_SECONDS  with metrics_linger_seconds only
//                             (gradwire run --dashboard), unless
//                             inherited: how long the worker keeps
//                             /metrics up when it has finished, so that
//                             Prometheus scrapes its last counts (Python:
//                             at exit; gradwire-worker reads it as its
//                             --metrics-linger-seconds)
//   OMP_NUM_THREADS           cores / WORLD_SIZE (at least 1), unless
//                             inherited (WorkerEnvironment,
//                             cluster_commands.h)
//   PYTHONUNBUFFERED          1, unless inherited: a Python worker's
//                             stdout is a pipe, which Python would
//                             otherwise flush only every 8 KiB
//
// The GRADWIRE_TLS_* and GRADWIRE_AUTH_TOKEN_FILE names are those through
// which the gradwire binaries read their --tls-* and --auth-token-file
// flags (common/flags/command_line.h).
//
// Thread safety: pure functions (RunEnvironment reads the CPU affinity and
// the environment).
#ifndef GRADWIRE_CLI_RUN_ENVIRONMENT_H_
#define GRADWIRE_CLI_RUN_ENVIRONMENT_H_

#include <string>
#include <vector>

#include "common/tls/transport_security.h"

namespace gradwire::cli {

inline constexpr char kShardsVariable[] = "GRADWIRE_SHARDS";
inline constexpr char kRankVariable[] = "RANK";
inline constexpr char kWorldSizeVariable[] = "WORLD_SIZE";
inline constexpr char kLocalRankVariable[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSizeVariable[] = "LOCAL_WORLD_SIZE";
inline constexpr char kMasterAddrVariable[] = "MASTER_ADDR";
inline constexpr char kMasterPortVariable[] = "MASTER_PORT";
inline constexpr char kLocalStoreVariable[] = "GRADWIRE_LOCAL_STORE";
inline constexpr char kRunDirVariable[] = "GRADWIRE_RUN_DIR";
inline constexpr char kSummaryJsonVariable[] = "GRADWIRE_SUMMARY_JSON";
inline constexpr char kTlsCaVariable[] = "GRADWIRE_TLS_CA";
inline constexpr char kTlsCertVariable[] = "GRADWIRE_TLS_CERT";
inline constexpr char kTlsKeyVariable[] = "GRADWIRE_TLS_KEY";
inline constexpr char kTlsServerNameVariable[] = "GRADWIRE_TLS_SERVER_NAME";
inline constexpr char kAuthTokenFileVariable[] = "GRADWIRE_AUTH_TOKEN_FILE";
inline constexpr char kAllowInsecureTokenVariable[] =
    "GRADWIRE_ALLOW_INSECURE_TOKEN";
inline constexpr char kMetricsPortVariable[] = "GRADWIRE_METRICS_PORT";
inline constexpr char kMetricsAddressVariable[] = "GRADWIRE_METRICS_ADDRESS";
inline constexpr char kMetricsPortFileVariable[] = "GRADWIRE_METRICS_PORT_FILE";
inline constexpr char kMetricsLingerSecondsVariable[] =
    "GRADWIRE_METRICS_LINGER_SECONDS";

// What every worker of a run shares.
struct RunEnvironment {
  // Workers of the whole job (every node's together).
  int world_size = 1;
  // This node's rank and its number of workers (0: world_size, one node).
  int node_rank = 0;
  int node_workers = 0;
  // Whether the workers of this node form its local group: LOCAL_RANK and
  // LOCAL_WORLD_SIZE then say so, and gradwire's worker is the node.
  bool local_group = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // "host:port" of the node's store (GRADWIRE_LOCAL_STORE); empty: unset.
  std::string local_store;
  // "host:port" of each shard, in shard-id order.
  std::vector<std::string> shards;
  // The workers' side of the transport (tls_ca, tls_cert, tls_key,
  // tls_server_name, auth_token_file, allow_insecure_token; paths as they
  // should appear).
  TransportSecurityFiles transport;
  // The run directory, absolute.
  std::string run_dir;
  // GRADWIRE_METRICS_LINGER_SECONDS; 0: unset.
  int metrics_linger_seconds = 0;
};

// The "NAME=value" entries that this node's worker `index` gets
// (SpawnOptions::extra_env): every variable of the contract above that has
// a value. Its files in the run directory are named by `index`.
std::vector<std::string> WorkerVariables(const RunEnvironment& run, int index);

// The transport variables that have no value in `run`: removed from what
// the workers inherit (SpawnOptions::unset_env), so that an outer job's
// settings cannot leak into this one.
std::vector<std::string> UnsetTransportVariables(const RunEnvironment& run);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_ENVIRONMENT_H_
