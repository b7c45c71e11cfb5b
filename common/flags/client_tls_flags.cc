// The client side of common/flags/tls_flags.h.
#include "absl/flags/flag.h"
#include "common/flags/tls_flags.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate chain presented for mutual TLS (needs "
          "--tls-key and --tls-ca).");
ABSL_FLAG(std::string, tls_key, "",
          "PEM private key of --tls-cert (unencrypted).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificates that the server's certificate must chain to; "
          "turns TLS on. Empty: plaintext.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check in the server's certificate (needs --tls-ca). "
          "Empty: the host of the address.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token sent with every call (trailing "
          "whitespace is ignored). Empty: no token.");
ABSL_FLAG(bool, allow_insecure_token, false,
          "Accept a bearer token without TLS (--auth-token-file without "
          "--tls-ca): the token then crosses "
          "the network in clear. Without it such a command line is refused.");

namespace gradwire {

TransportSecurityFiles ClientTlsFilesFromFlags() {
  TransportSecurityFiles files;
  files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  files.tls_key = absl::GetFlag(FLAGS_tls_key);
  files.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  files.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  files.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  files.allow_insecure_token = absl::GetFlag(FLAGS_allow_insecure_token);
  return files;
}

}  // namespace gradwire
