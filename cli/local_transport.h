// Transport security of `gradwire local`: --tls-dir (the output of
// scripts/dev-certs.sh) turns on mutual TLS and the bearer token for the
// whole local cluster; --auth-token-file alone turns on the token over
// plaintext, which needs --allow-insecure-token as it does for every binary
// (transport_security.h). These helpers turn them into each role's flags.
//
// Thread safety: pure functions (LoadLocalTransport reads the files).
#ifndef GRADWIRE_CLI_LOCAL_TRANSPORT_H_
#define GRADWIRE_CLI_LOCAL_TRANSPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tls/transport_security.h"

namespace gradwire::cli {

// The files scripts/dev-certs.sh writes into its output directory.
inline constexpr char kDevCaCert[] = "ca.pem";
inline constexpr char kDevServerCert[] = "server.pem";
inline constexpr char kDevServerKey[] = "server.key";
inline constexpr char kDevClientCert[] = "client.pem";
inline constexpr char kDevClientKey[] = "client.key";
inline constexpr char kDevAuthToken[] = "auth-token";

inline constexpr char kDevWorkerTokens[] = "worker-tokens";
inline constexpr char kDevWorkerTokenPrefix[] = "worker-token-";

// The shards' and the workers' settings.
struct LocalTransport {
  TransportSecurityFiles shard;
  // What every worker uses, and the health checks: the job's shared token.
  TransportSecurityFiles worker;
  // Where each worker's own token lies (DIR/worker-token-I) when the TLS
  // directory holds per-worker tokens; empty otherwise.
  std::string worker_token_dir;
};

// From --tls-dir (empty: plaintext), --auth-token-file (empty: with a
// TLS directory its auth-token file, otherwise no token) and
// --allow-insecure-token (given to both roles). With a directory the shards
// serve server.pem and require client certificates signed by ca.pem; the
// workers verify the shards with ca.pem and present client.pem. Where the
// directory also holds worker-tokens (and no --auth-token-file replaces its
// token), the shards take it as --worker-tokens-file and each worker sends
// its own token (WorkerTransport), so that no worker can act as another.
// Without a directory and without the token flag nothing adds a token: the
// launcher never sends one in clear on its own.
LocalTransport LocalTransportFrom(const std::string& tls_dir,
                                  const std::string& auth_token_file,
                                  bool allow_insecure_token = false);

// Checks both roles' files (LoadTransportSecurity), and with per-worker
// tokens that each of the `workers` workers has its token file, and
// returns what the health checks of `gradwire local` use: the workers'
// settings, loaded. INVALID_ARGUMENT naming the flag and file on a
// problem, with a hint about scripts/dev-certs.sh when a TLS directory
// lacks a file (for a missing worker token, the --workers it needs).
absl::StatusOr<TransportSecurity> LoadLocalTransport(
    const LocalTransport& transport, int workers);

// Worker `worker`'s settings: transport.worker, with the worker's own
// token file where there are per-worker tokens.
TransportSecurityFiles WorkerTransport(const LocalTransport& transport,
                                       int worker);

// "--tls-cert=...", ..., "--allow-insecure-token" for the flags set in
// `files` (none for plaintext without a token).
std::vector<std::string> TransportFlags(const TransportSecurityFiles& files);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_LOCAL_TRANSPORT_H_
