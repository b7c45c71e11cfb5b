// A worker's Prometheus metrics (common/metrics/): what it sent and
// received on the wire, what dense fp32 would have cost, how long each
// phase of a step took, and how training goes.
//
//   gradwire_worker_sent_bytes_total{rpc}       serialized request bytes
//   gradwire_worker_received_bytes_total{rpc}   serialized response bytes
//       rpc: init | push | pull (retried attempts included)
//   gradwire_worker_wire_sent_bytes_total       TCP stream bytes the shards
//   gradwire_worker_wire_received_bytes_total   acknowledged / sent back, as
//       the kernel counts them (client/wire_counters.h): the above plus
//       HTTP/2, gRPC and TLS framing; absent where the transport cannot
//       say (a Unix socket), rather than 0
//   gradwire_worker_dense_equivalent_bytes_total  fp32 dense pushes of the
//                                               same gradients
//   gradwire_worker_steps_total, gradwire_worker_rpc_retries_total
//   gradwire_worker_{step,reduce,compress,push,pull}_seconds  histograms
//   gradwire_worker_pull_wait_seconds  what of the pulls the training
//                                      thread waited for (pull ahead)
//   gradwire_worker_residual_norm   L2 norm of the error-feedback residuals
//                                   (ParameterSync refreshes it at most
//                                   once a second)
//   gradwire_worker_compression_state_bytes  host memory of the per-chunk
//                                   compression state: residuals, their
//                                   spare buffers, velocities (refreshed
//                                   with the residual norm)
//   gradwire_worker_startup_bytes   bytes sent and received by Register,
//                                   before step 0 (Init and the first pull)
//   gradwire_worker_startup_seconds  how long Register took
//   gradwire_worker_loss, gradwire_worker_samples_per_second,
//   gradwire_worker_epoch           set by the training loop
//   gradwire_worker_cpu_seconds_total{activity}  CPU seconds since
//       Register, by activity (cpu_account.h): compress, momentum, encode,
//       rpc, decode, copy, sync_other, other_threads (communication) and
//       compute (the training thread's forward, backward and loop)
//
// Every series has the labels worker (the worker id; "0.1" for local rank 1
// of worker 0) and compressor. The byte counters are the numbers the
// worker's summary reports: TotalSentBytes() and friends read them back.
//
// Hot path: children are resolved at Create; each update is an atomic add
// or store, no lock, no allocation.
//
// Thread safety: every method may be called concurrently.
#ifndef GRADWIRE_WORKER_WORKER_METRICS_H_
#define GRADWIRE_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "common/metrics/registry.h"
#include "worker/cpu_account.h"

namespace gradwire {

// One step's timings, in seconds.
struct StepTimings {
  double step = 0;
  double reduce = 0;
  double compress = 0;
  double push = 0;
  double pull = 0;
  // The part of the pulls the training thread waited for.
  double pull_wait = 0;
};

class WorkerMetrics {
 public:
  // Registers the families in `registry` (which must outlive the result)
  // and resolves the children for `worker` and `compressor`. Errors: the
  // Registry's (a family name taken by another type).
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(
      metrics::Registry* registry, const std::string& worker,
      const std::string& compressor);
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // Brings the byte and retry counters up to `traffic` (totals since the
  // client was made; they only grow).
  void RecordTraffic(const TrafficStats& traffic);
  // Brings the wire byte counters up to `wire` (PsClient::wire_bytes();
  // they only grow). Unknown totals change nothing: the wire series
  // appear with the first known totals.
  void RecordWire(const WireTotals& wire);
  void AddDenseEquivalentBytes(uint64_t bytes);
  // One finished step.
  void RecordStep(const StepTimings& timings, double residual_norm);
  void SetCompressionStateBytes(uint64_t bytes);
  // Brings the CPU counters up to `totals` (CpuAccount::Totals(); they
  // only grow).
  void RecordCpu(const CpuTotals& totals);
  // What the start-up (Register) cost: bytes both ways and seconds.
  void SetStartup(uint64_t bytes, double seconds);
  void SetLoss(double loss);
  void SetSamplesPerSecond(double samples_per_second);
  void SetEpoch(int epoch);

  // Counter values, as the summary reports them.
  uint64_t SentBytes(const char* rpc) const;
  uint64_t ReceivedBytes(const char* rpc) const;
  uint64_t DenseEquivalentBytes() const;
  // The wire counters; unknown until RecordWire saw known totals.
  WireTotals WireBytes() const;

 private:
  struct Children;
  explicit WorkerMetrics(std::unique_ptr<Children> children);

  // The families of Create, by group, registered in `registry` with their
  // children for `labels` resolved into *children. Errors: the Registry's.
  // Traffic: bytes by RPC, retries, dense equivalent.
  static absl::Status AddTrafficFamilies(metrics::Registry* registry,
                                         const metrics::Labels& labels,
                                         Children* children);
  // Wire bytes: the families only; their children come with the first
  // known totals (RecordWire).
  static absl::Status AddWireFamilies(metrics::Registry* registry,
                                      const metrics::Labels& labels,
                                      Children* children);
  // Steps: their count and the phase histograms.
  static absl::Status AddStepFamilies(metrics::Registry* registry,
                                      const metrics::Labels& labels,
                                      Children* children);
  // Training: residual norm, start-up, loss, throughput, epoch.
  static absl::Status AddTrainingFamilies(metrics::Registry* registry,
                                          const metrics::Labels& labels,
                                          Children* children);

  std::unique_ptr<Children> children_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_WORKER_METRICS_H_
