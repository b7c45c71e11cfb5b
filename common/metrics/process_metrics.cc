#include "common/metrics/process_metrics.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#ifndef GRADWIRE_METRICS_VERSION
#define GRADWIRE_METRICS_VERSION "unknown"
#endif
#ifndef GRADWIRE_METRICS_REVISION
#define GRADWIRE_METRICS_REVISION "unknown"
#endif

namespace gradwire::metrics {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The boot time ("btime" line of /proc/stat) in Unix seconds.
std::optional<double> BootTimeSeconds() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/stat"), '\n')) {
    double seconds = 0;
    if (absl::ConsumePrefix(&line, "btime ") &&
        absl::SimpleAtod(line, &seconds)) {
      return seconds;
    }
  }
  return std::nullopt;
}

}  // namespace

BuildInfo CompiledBuildInfo() {
  return BuildInfo{GRADWIRE_METRICS_VERSION, GRADWIRE_METRICS_REVISION};
}

std::optional<double> ProcessStartTimeSeconds() {
  // Field 22 of /proc/self/stat is the start time in clock ticks since
  // boot. Field 2, the command name, is in parentheses and may hold spaces,
  // so fields are counted from the last ')'.
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t name_end = stat.rfind(')');
  const std::optional<double> boot = BootTimeSeconds();
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (name_end == std::string::npos || !boot || ticks_per_second <= 0) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipEmpty());
  // After the name come field 3 (state) onwards: field 22 is index 19.
  double ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtod(fields[19], &ticks)) {
    return std::nullopt;
  }
  return *boot + ticks / static_cast<double>(ticks_per_second);
}

std::optional<double> ResidentMemoryBytes() {
  // statm: size resident shared text lib data dt, in pages.
  const std::string statm = ReadFile("/proc/self/statm");
  const std::vector<absl::string_view> fields =
      absl::StrSplit(statm, ' ', absl::SkipEmpty());
  double pages = 0;
  if (fields.size() < 2 || !absl::SimpleAtod(fields[1], &pages)) {
    return std::nullopt;
  }
  return pages * static_cast<double>(sysconf(_SC_PAGESIZE));
}

absl::StatusOr<std::unique_ptr<ProcessMetrics>> ProcessMetrics::Register(
    Registry* registry, const BuildInfo& build) {
  auto info = registry->AddGaugeFamily(
      {"gradwire_build_info",
       "Version and git revision of this binary; the value is always 1."});
  if (!info.ok()) return info.status();
  (*info)
      ->Add({{"version", build.version}, {"revision", build.revision}})
      .Set(1);
  auto start = registry->AddGaugeFamily(
      {"process_start_time_seconds",
       "Start time of the process since the Unix epoch, in seconds."});
  if (!start.ok()) return start.status();
  (*start)->Add({}).Set(ProcessStartTimeSeconds().value_or(
      absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())));
  auto memory = registry->AddCallback(
      MetricType::kGauge,
      {"process_resident_memory_bytes", "Resident memory size in bytes."},
      [](CallbackSink& sink) {
        if (std::optional<double> bytes = ResidentMemoryBytes()) {
          sink.Add({}, *bytes);
        }
      });
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<ProcessMetrics>(
      new ProcessMetrics(*std::move(memory)));
}

}  // namespace gradwire::metrics
