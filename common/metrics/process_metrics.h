// The metrics every gradwire process exposes about itself:
//
//   gradwire_build_info{revision="<git>",version="<x.y.z>"} 1
//   process_start_time_seconds   Unix time the process started
//   process_resident_memory_bytes  resident set size, read from
//                                  /proc/self/statm at each scrape
//
// build_info follows the Prometheus convention of a constant 1 whose labels
// carry the information, so it can be joined onto other series. The
// version is the CMake project version; the revision is `git rev-parse
// --short HEAD` of the source tree when the build was configured, or
// "unknown" outside a git checkout.
//
// Thread safety: Register may be called from any thread.
#ifndef GRADWIRE_COMMON_METRICS_PROCESS_METRICS_H_
#define GRADWIRE_COMMON_METRICS_PROCESS_METRICS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"

namespace gradwire::metrics {

struct BuildInfo {
  std::string version;
  std::string revision;
};

// The version and revision compiled into this binary.
BuildInfo CompiledBuildInfo();

// This process' start as Unix seconds, from /proc/self/stat and the boot
// time in /proc/stat; nullopt where they cannot be read.
std::optional<double> ProcessStartTimeSeconds();

// This process' resident set size in bytes, from /proc/self/statm; nullopt
// where it cannot be read.
std::optional<double> ResidentMemoryBytes();

class ProcessMetrics {
 public:
  // Registers the three families in `registry`, which must outlive the
  // returned object (it keeps the resident-memory callback registered).
  // The start time falls back to the time of this call where /proc cannot
  // tell it. Errors: those of the Registry (a name already taken).
  static absl::StatusOr<std::unique_ptr<ProcessMetrics>> Register(
      Registry* registry, const BuildInfo& build = CompiledBuildInfo());

 private:
  explicit ProcessMetrics(std::unique_ptr<CallbackRegistration> memory)
      : memory_(std::move(memory)) {}
  std::unique_ptr<CallbackRegistration> memory_;
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_PROCESS_METRICS_H_
