// Transport security of gradwire's gRPC connections: TLS, mutual TLS and a
// bearer token, as the --tls-* and --auth-token-file flags describe them.
//
// Every binary takes the same flags (gradwire-server as a server,
// gradwire-worker and `gradwire health` as clients):
//   --tls-cert, --tls-key  PEM certificate chain and its private key: the
//                          server's certificate, or the client certificate
//                          a client presents for mutual TLS;
//   --tls-ca               PEM CA certificates: a client verifies the
//                          server with them (TLS is on for a client exactly
//                          when --tls-ca is set); a server verifies client
//                          certificates with them;
//   --tls-require-client-cert (server) mutual TLS: refuse a client without a
//                          certificate signed by --tls-ca;
//   --tls-server-name      (client) the name checked in the server's
//                          certificate instead of the address's host;
//   --auth-token-file      the bearer token (bearer_token.h);
//   --allow-insecure-token a token without TLS: refused otherwise, because
//                          the token would cross the network in clear
//                          (for loopback tests and trusted networks).
// Without any of them the connection is plaintext, the default for runs on
// one machine.
//
// TransportSecurityFiles holds the flags; LoadTransportSecurity checks them
// together, reads the files and returns a TransportSecurity holding their
// contents, from which grpc_transport.h builds credentials. Reading once,
// at start-up, means a bad file stops the binary with a usage error before
// it binds or connects, and nothing reads the files again later.
//
// Thread safety: plain values; the functions read only their arguments and
// the named files.
#ifndef GRADWIRE_COMMON_TLS_TRANSPORT_SECURITY_H_
#define GRADWIRE_COMMON_TLS_TRANSPORT_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// Which end of the connection the settings are for.
enum class TransportRole { kServer, kClient };

// The flags, as given: paths of PEM files (empty: not given).
struct TransportSecurityFiles {
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  // Server only.
  bool tls_require_client_cert = false;
  // Client only; empty: the host of the address.
  std::string tls_server_name;
  std::string auth_token_file;
  // Server only: --worker-tokens-file, the per-worker tokens. The server
  // reads it itself (server/process/worker_tokens.h); it is here because a
  // token of any kind needs TLS or allow_insecure_token.
  std::string worker_tokens_file;
  // Accept a token (auth_token_file, worker_tokens_file) without TLS.
  bool allow_insecure_token = false;
};

// The settings with the files' contents. A default-constructed value is
// plaintext without a token.
struct TransportSecurity {
  TransportRole role = TransportRole::kClient;
  // PEM texts; empty when the file was not given.
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  bool require_client_cert = false;
  std::string server_name;
  // Empty: no token.
  std::string auth_token;

  // Server: TLS when it has a certificate. Client: TLS when it has a CA.
  bool tls() const;
  // Server: client certificates are required. Client: it presents one.
  bool mutual_tls() const;
};

// Checks `files` for `role` and reads them. INVALID_ARGUMENT naming the flag
// (--tls-cert ...) and the path on the first problem:
//   a file that cannot be read or is empty, that holds no PEM certificate
//   (--tls-cert, --tls-ca) or no unencrypted PEM private key (--tls-key);
//   a key that does not belong to the certificate;
//   --tls-cert without --tls-key or the reverse;
//   server: --tls-ca without a certificate, --tls-require-client-cert
//   without --tls-ca, --tls-server-name (a client flag);
//   client: a certificate or --tls-server-name without --tls-ca,
//   --tls-require-client-cert (a server flag);
//   a bad token file (LoadAuthToken);
//   a token (--auth-token-file, or --worker-tokens-file on a server) without
//   TLS (server: --tls-cert; client: --tls-ca) unless allow_insecure_token.
// When allow_insecure_token lets a token go without TLS, writes one warning
// line on stderr.
absl::StatusOr<TransportSecurity> LoadTransportSecurity(
    const TransportSecurityFiles& files, TransportRole role);

// LoadTransportSecurity's status alone (for --dry-run and option checks);
// writes no warning.
absl::Status ValidateTransportSecurity(const TransportSecurityFiles& files,
                                       TransportRole role);

// The transport for a start-up log line, e.g. "mutual TLS" or "plaintext
// (no TLS; anyone who can reach this port can train)" for a server;
// "TLS" or "plaintext (no TLS)" for a client.
std::string DescribeTransport(const TransportSecurity& security);

// "on" or "off".
std::string DescribeAuthToken(const TransportSecurity& security);

// The content of the file `path` given to --`flag` (hyphenated name),
// at most 1 MiB. INVALID_ARGUMENT "--flag=path: ..." when it cannot be read,
// is not a regular file, or is larger.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_TLS_TRANSPORT_SECURITY_H_
