// The transport-security flags, defined once per side of a connection:
//   server side (gradwire_server_tls_flags): --tls-cert, --tls-key,
//     --tls-ca, --tls-require-client-cert, --auth-token-file,
//     --allow-insecure-token;
//   client side (gradwire_client_tls_flags): --tls-cert, --tls-key,
//     --tls-ca, --tls-server-name, --auth-token-file, --allow-insecure-token.
// The two are separate libraries because Abseil allows one definition of a
// flag name per binary and the help texts differ: a binary links the one
// for its side. The files are checked and read by LoadTransportSecurity
// (common/tls/transport_security.h).
#ifndef GRADWIRE_COMMON_FLAGS_TLS_FLAGS_H_
#define GRADWIRE_COMMON_FLAGS_TLS_FLAGS_H_

#include "absl/strings/string_view.h"
#include "common/tls/transport_security.h"

namespace gradwire {

inline constexpr absl::string_view kServerTlsFlagNames[] = {
    "tls_cert",        "tls_key",
    "tls_ca",          "tls_require_client_cert",
    "auth_token_file", "allow_insecure_token"};

inline constexpr absl::string_view kClientTlsFlagNames[] = {
    "tls_cert",        "tls_key",         "tls_ca",
    "tls_server_name", "auth_token_file", "allow_insecure_token"};

// The server-side flags' values (link gradwire_server_tls_flags);
// worker_tokens_file is left empty (the server binary owns that flag).
TransportSecurityFiles ServerTlsFilesFromFlags();

// The client-side flags' values (link gradwire_client_tls_flags).
TransportSecurityFiles ClientTlsFilesFromFlags();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_FLAGS_TLS_FLAGS_H_
