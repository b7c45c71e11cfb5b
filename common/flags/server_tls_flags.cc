// The server side of common/flags/tls_flags.h.
#include "absl/flags/flag.h"
#include "common/flags/tls_flags.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this server; with --tls-key turns TLS on. "
          "Empty: plaintext.");
ABSL_FLAG(std::string, tls_key, "",
          "PEM private key of --tls-cert (unencrypted).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificates that client certificates must chain to "
          "(verified when presented; required with "
          "--tls-require-client-cert).");
ABSL_FLAG(bool, tls_require_client_cert, false,
          "Mutual TLS: refuse clients without a certificate signed by "
          "--tls-ca.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token every ParameterServer call must "
          "carry (trailing whitespace is ignored); the health service needs "
          "none. Empty: no token.");
ABSL_FLAG(bool, allow_insecure_token, false,
          "Accept a bearer token without TLS (--auth-token-file or "
          "--worker-tokens-file without --tls-cert): the token then crosses "
          "the network in clear. Without it such a command line is refused.");

namespace gradwire {

TransportSecurityFiles ServerTlsFilesFromFlags() {
  TransportSecurityFiles files;
  files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  files.tls_key = absl::GetFlag(FLAGS_tls_key);
  files.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  files.tls_require_client_cert = absl::GetFlag(FLAGS_tls_require_client_cert);
  files.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  files.allow_insecure_token = absl::GetFlag(FLAGS_allow_insecure_token);
  return files;
}

}  // namespace gradwire
