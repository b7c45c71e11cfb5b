#include "common/flags/metrics_flags.h"

#include <arpa/inet.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"

ABSL_FLAG(std::string, metrics_address, "0.0.0.0",
          "Numeric IPv4 address of the Prometheus endpoint (/metrics).");
ABSL_FLAG(int64_t, metrics_port, 0,
          "TCP port of the Prometheus endpoint; 0 lets the OS pick one "
          "(logged, and written to --metrics-port-file); -1 turns it off.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, the metrics port is written to this file (atomically) "
          "once bound (before --port-file, where there is one).");

namespace gradwire {

MetricsEndpointSettings MetricsEndpointFromFlags() {
  MetricsEndpointSettings settings;
  settings.address = absl::GetFlag(FLAGS_metrics_address);
  settings.port = absl::GetFlag(FLAGS_metrics_port);
  settings.port_file = absl::GetFlag(FLAGS_metrics_port_file);
  return settings;
}

absl::Status ValidateMetricsEndpoint(const MetricsEndpointSettings& settings) {
  if (settings.port < kMetricsOff || settings.port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--metrics-port=%d: must be in [0, 65535] (0: the OS picks) or -1 "
        "(off)",
        settings.port));
  }
  in_addr parsed;
  if (inet_pton(AF_INET, settings.address.c_str(), &parsed) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--metrics-address=%s: must be a numeric IPv4 address such as "
        "0.0.0.0 or 127.0.0.1",
        settings.address));
  }
  if (settings.port == kMetricsOff && !settings.port_file.empty()) {
    return absl::InvalidArgumentError(
        "--metrics-port-file: needs metrics (--metrics-port is -1)");
  }
  return absl::OkStatus();
}

}  // namespace gradwire
