// gradwire-worker: trains Fashion-MNIST against gradwire shards.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "apps/fashion_mnist/trainer.h"
#include "apps/fashion_mnist/worker_flags.h"
#include "common/flags/program.h"
#include "common/format/human_bytes.h"
#include "common/heap_tuning.h"
#include "common/lock_checks.h"
#include "common/metrics/exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "common/port_file.h"
#include "common/tls/transport_security.h"
#include "worker/sync_settings.h"

namespace {

// The /metrics endpoint and the process metrics; none with
// --metrics-port=-1.
struct MetricsExporter {
  std::unique_ptr<gradwire::metrics::ProcessMetrics> process;
  std::unique_ptr<gradwire::metrics::Exposer> exposer;
};

absl::StatusOr<MetricsExporter> StartMetrics(
    const gradwire::WorkerConfig& config, const std::string& label,
    gradwire::metrics::Registry* registry) {
  MetricsExporter exporter;
  if (config.metrics.port < 0) return exporter;
  auto process = gradwire::metrics::ProcessMetrics::Register(registry);
  if (!process.ok()) return process.status();
  exporter.process = std::move(*process);
  gradwire::metrics::ExposerOptions options;
  options.address = config.metrics.address;
  options.port = static_cast<int>(config.metrics.port);
  auto exposer = gradwire::metrics::Exposer::Start(options, registry);
  if (!exposer.ok()) return exposer.status();
  exporter.exposer = std::move(*exposer);
  absl::FPrintF(stderr, "%s: metrics at http://%s:%d/metrics\n", label,
                config.metrics.address, exporter.exposer->port());
  if (!config.metrics.port_file.empty()) {
    if (absl::Status s = gradwire::WritePortFile(config.metrics.port_file,
                                                 exporter.exposer->port());
        !s.ok()) {
      return s;
    }
  }
  return exporter;
}

// "worker 3", or "worker 3.1" for local rank 1 of worker 3.
std::string WorkerLabel(const gradwire::SyncOptions& sync) {
  return absl::StrFormat("worker %d%s", sync.client.worker_id,
                         sync.local.size > 1
                             ? absl::StrFormat(".%d", sync.local.rank)
                             : std::string());
}

// The flags, read and checked (environment first, the command line
// winning); exits with the usage code for a bad one, and with 0 after
// --help or --dry-run.
gradwire::WorkerConfig ConfigOrExit(int argc, char** argv) {
  const gradwire::ProgramFlags program = {
      "gradwire-worker", gradwire::kWorkerUsage, gradwire::WorkerFlagNames()};
  gradwire::ParseFlagsOrExit(program, argc, argv);
  auto config = gradwire::WorkerConfigFromFlags();
  if (!config.ok()) gradwire::ExitWithUsageError(program, config.status());
  gradwire::ExitAfterDryRunIfRequested(program);
  return *std::move(config);
}

// ", wire X sent, Y received (TCP)" for the done line; empty where the
// transport cannot count its bytes.
std::string WireBytesText(const gradwire::TrainingResult& result) {
  if (!result.wire.known) return "";
  return absl::StrFormat(", wire %s sent, %s received (TCP)",
                         gradwire::HumanBytes(result.wire.sent),
                         gradwire::HumanBytes(result.wire.received));
}

// The run's last line on stdout: steps, accuracy and bytes.
void PrintDone(const std::string& label,
               const gradwire::TrainingResult& result) {
  const std::string accuracy =
      result.evaluated
          ? absl::StrFormat("test accuracy %.4f", result.test_accuracy)
          : std::string("not evaluated");
  std::printf(
      "%s done: %d steps in %.1f s, %s, pushed %s "
      "(dense fp32 would be %s, %.1fx less), pulled %s%s\n",
      label.c_str(), static_cast<int>(result.steps), result.wall_seconds,
      accuracy.c_str(), gradwire::HumanBytes(result.sync.pushed_bytes).c_str(),
      gradwire::HumanBytes(result.sync.dense_equivalent_bytes).c_str(),
      gradwire::CompressionRatio(result.sync.dense_equivalent_bytes,
                                 result.sync.pushed_bytes),
      gradwire::HumanBytes(result.sync.pulled_bytes).c_str(),
      WireBytesText(result).c_str());
  std::fflush(stdout);
}

// Trains with `config` and reports the result; the process's exit code.
int Run(gradwire::WorkerConfig& config) {
  const std::string label = WorkerLabel(config.sync);
  config.trainer.label = label;
  if (config.tune_heap) {
    absl::FPrintF(stderr, "%s: %s\n", label,
                  gradwire::TuneHeapForTraining().description);
  }
  absl::FPrintF(stderr, "%s: transport: %s; auth token: %s\n", label,
                gradwire::DescribeTransport(config.sync.client.transport),
                gradwire::DescribeAuthToken(config.sync.client.transport));
  absl::FPrintF(stderr, "%s: %s\n", label,
                gradwire::DescribeOptimizerPlacement(config.sync));
  absl::FPrintF(stderr, "%s: %s\n", label, config.settings_summary);
  // Metrics first, so that a scraper sees the worker from its start.
  gradwire::metrics::Registry registry;
  auto exporter = StartMetrics(config, label, &registry);
  if (!exporter.ok()) {
    absl::FPrintF(stderr, "%s: %s\n", label, exporter.status().ToString());
    return 1;
  }
  if (config.metrics.port >= 0) config.sync.metrics_registry = &registry;
  std::unique_ptr<gradwire::ParameterSync> sync;
  if (config.compute_only) {
    absl::FPrintF(stderr, "%s: compute only: local SGD, no shards\n", label);
  } else {
    auto connected = gradwire::ParameterSync::Connect(config.sync);
    if (!connected.ok()) {
      absl::FPrintF(stderr, "%s: %s\n", label, connected.status().ToString());
      return 1;
    }
    sync = *std::move(connected);
  }
  auto result = gradwire::Train(config.trainer, config.sync, sync.get());
  if (!result.ok()) {
    absl::FPrintF(stderr, "%s: %s\n", label, result.status().ToString());
    return 1;
  }
  if (!config.trainer.quiet) PrintDone(label, *result);
  if (!config.summary_json.empty()) {
    std::ofstream out(config.summary_json);
    out << gradwire::SummaryJson(*result, config.sync);
    if (!out.good()) {
      absl::FPrintF(stderr, "%s: cannot write %s\n", label,
                    config.summary_json);
      return 1;
    }
  }
  if (exporter->exposer != nullptr && config.metrics_linger_seconds > 0) {
    // A Job's last counts would otherwise never reach Prometheus.
    absl::FPrintF(stderr, "%s: keeping /metrics up for %g s\n", label,
                  config.metrics_linger_seconds);
    absl::SleepFor(absl::Seconds(config.metrics_linger_seconds));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gradwire::DisableMutexDeadlockDetection();
  gradwire::WorkerConfig config = ConfigOrExit(argc, argv);
  return Run(config);
}
