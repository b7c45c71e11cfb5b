// The Prometheus endpoint flags every long-running gradwire binary takes:
// --metrics-address, --metrics-port (0: the OS picks, -1: off) and
// --metrics-port-file. Defined once here; a binary lists
// kMetricsFlagNames among its flags and reads them with
// MetricsEndpointFromFlags.
#ifndef GRADWIRE_COMMON_FLAGS_METRICS_FLAGS_H_
#define GRADWIRE_COMMON_FLAGS_METRICS_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// The metrics port value that turns the endpoint off.
inline constexpr int64_t kMetricsOff = -1;

// Where a process serves /metrics.
struct MetricsEndpointSettings {
  // Numeric IPv4 address to bind.
  std::string address = "0.0.0.0";
  // TCP port in [0, 65535] (0: the OS picks one), or kMetricsOff.
  int64_t port = 0;
  // If set, the bound port is written here (atomically) once listening;
  // only with the endpoint on.
  std::string port_file;
};

inline constexpr absl::string_view kMetricsFlagNames[] = {
    "metrics_address", "metrics_port", "metrics_port_file"};

// The settings the flags give. Unchecked: see ValidateMetricsEndpoint.
MetricsEndpointSettings MetricsEndpointFromFlags();

// INVALID_ARGUMENT naming the flag: a port outside [-1, 65535], an address
// that is not numeric IPv4, a port file with the endpoint off.
absl::Status ValidateMetricsEndpoint(const MetricsEndpointSettings& settings);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_FLAGS_METRICS_FLAGS_H_
