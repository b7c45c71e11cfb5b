#include "client/client_options.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace {

absl::Status InvalidOption(absl::string_view name, absl::string_view value,
                           absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("ClientOptions.", name, " = ", value,
                   " is invalid: expected ", expected));
}

}  // namespace

absl::Status ValidateClientOptions(const ClientOptions& options) {
  const auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration();
  };
  if (!positive(options.rpc_timeout)) {
    return InvalidOption("rpc_timeout",
                         absl::FormatDuration(options.rpc_timeout), "> 0");
  }
  if (!positive(options.pull_timeout)) {
    return InvalidOption("pull_timeout",
                         absl::FormatDuration(options.pull_timeout), "> 0");
  }
  if (options.max_attempts < 1) {
    return InvalidOption("max_attempts", absl::StrCat(options.max_attempts),
                         ">= 1");
  }
  if (!positive(options.initial_backoff)) {
    return InvalidOption("initial_backoff",
                         absl::FormatDuration(options.initial_backoff), "> 0");
  }
  if (options.max_backoff < options.initial_backoff) {
    return InvalidOption("max_backoff",
                         absl::FormatDuration(options.max_backoff),
                         ">= initial_backoff");
  }
  if (!positive(options.connect_timeout)) {
    return InvalidOption("connect_timeout",
                         absl::FormatDuration(options.connect_timeout), "> 0");
  }
  if (options.max_message_bytes < 1024 ||
      options.max_message_bytes >
          static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidOption("max_message_bytes",
                         absl::StrCat(options.max_message_bytes),
                         "in [1 KiB, 2 GiB - 1]");
  }
  const TransportSecurity& transport = options.transport;
  if (transport.role != TransportRole::kClient) {
    return InvalidOption("transport.role", "server", "client");
  }
  if (transport.cert_pem.empty() != transport.key_pem.empty()) {
    return InvalidOption("transport", "a certificate or key alone",
                         "both or neither");
  }
  if (!transport.tls() &&
      !(transport.cert_pem.empty() && transport.server_name.empty())) {
    return InvalidOption("transport", "a certificate or server name",
                         "given only with a CA (TLS)");
  }
  return absl::OkStatus();
}

}  // namespace gradwire
