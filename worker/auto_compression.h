// Compressor "auto" inside a worker: one CompressionChooser
// (common/compress/auto/compression_chooser.h) over the registered
// tensors, one layer group per tensor, fed each step with what the worker
// measures anyway, and one compressor per rung of the ladder
// (ratio_ladder.h), which each chunk takes from its group's rung.
//
//   - the link: each push's and pull's payload bytes and seconds
//     (ObserveTransfer), through a LinkEstimator; the wire bytes per
//     payload byte (NoteWireRatio) when the client can count them, else
//     1.3;
//   - the compute: each step's computation and backward seconds
//     (NoteCompute), smoothed, and the training thread's CPU seconds of
//     computation (NoteCpu); the smaller of the two is taken, since the
//     wall clock of a step also holds the CPU that the step's own pushes
//     take on a shared host (which would make more bytes look affordable,
//     and send more, the more bytes are sent);
//   - the CPU cost of a byte: the worker's CPU seconds of encoding, RPCs
//     and decoding per payload byte (NoteCpu), which the chooser adds to
//     each byte's link time;
//   - the gradients: each chunk's gradient and residual norms, written
//     by the compressing threads (NoteChunkNorms), summed per group, and the
//     model's gradient norm through a CriticalPhaseDetector.
// BeginStep evaluates the chooser once per step, before the step's first
// chunk is compressed, from the first step with a measured step time on
// (before it no choice changes, so that the chooser's reference step time
// is the starting rung's); a chunk's compressor changes only there, and its
// error-feedback residual carries over (every rung is compressed with the
// same residual, whose meaning, what earlier pushes left out, no rung
// changes).
//
// Thread safety: ObserveTransfer may be called from any thread at any
// time. CompressorFor and NoteChunkNorms may be called concurrently for
// different chunks between BeginStep calls (the compressing threads).
// BeginStep, NoteCompute, NoteCpu, NoteWireRatio and the accessors belong
// to the
// training thread, while no chunk is being compressed.
#ifndef GRADWIRE_WORKER_AUTO_COMPRESSION_H_
#define GRADWIRE_WORKER_AUTO_COMPRESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/compress/auto/compression_chooser.h"
#include "common/compress/auto/critical_phase.h"
#include "common/compress/auto/link_estimator.h"
#include "common/compress/compressor.h"
#include "common/metrics/registry.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

// What one evaluation chose: for the run's summary and report.
struct AutoCompressionStep {
  uint64_t step = 0;
  // Payload bytes per second of the link (0: not measured yet).
  double link_bytes_per_second = 0;
  // The step's payload byte budget and the chosen rungs' payload bytes.
  double budget_bytes = 0;
  double chosen_bytes = 0;
  bool critical = false;
  // Per group, RungRatio of its rung.
  std::vector<double> ratios;
};

// What compressor "auto" did over a run.
struct AutoCompressionReport {
  // The group names (the registered tensors), in order.
  std::vector<std::string> groups;
  // The evaluations, oldest first; at most kMaxHistory, thinned evenly
  // over a long run.
  std::vector<AutoCompressionStep> history;
  static constexpr size_t kMaxHistory = 2048;
};

// What the worker's options say about "auto" (SyncOptions::auto_budget,
// the metrics registry and the worker's labels).
struct AutoCompressionSetup {
  double budget_fraction = 1.0;
  metrics::Registry* registry = nullptr;
  metrics::Labels labels;
};

// The report as the members of a worker's summary JSON, one JSON object:
//   "auto_link_bytes_per_second": the last link estimate (payload bytes/s),
//   "auto_chosen_ratios": {"<group>": ratio, ...}, the last choice,
//   "auto_history": {"steps": [...], "link_bytes_per_second": [...],
//                    "budget_bytes": [...], "chosen_bytes": [...],
//                    "critical": [0|1, ...], "ratios": {"<group>": [...]}}
// (ratios as RungRatio; `gradwire report` plots the history).
std::string AutoCompressionSummaryJson(const AutoCompressionReport& report);

struct AutoCompressionOptions {
  ChooserOptions chooser;
  CriticalPhaseOptions critical;
  // The pushes' options (min_kept, precision, non-finite policy, seed),
  // which every rung keeps.
  CompressorOptions base;
  // Where to export gradwire_worker_chosen_ratio{group} (null: nowhere),
  // with these labels besides the group; not owned.
  metrics::Registry* registry = nullptr;
  metrics::Labels labels;
};

// The learning rate of update `update` under `optimizer`'s schedule (warm-up,
// step decay, cosine), as the shards apply it; for spotting its drops.
double ScheduledLearningRate(const v1::OptimizerConfig& optimizer,
                             uint64_t update);

class AutoCompression {
 public:
  // Groups named `group_names` (one per registered tensor) of
  // `group_numel` elements; `chunk_group[key]` is the group of chunk `key`.
  // INVALID_ARGUMENT when a rung's compressor cannot be made from
  // options.base; the registry's errors.
  static absl::StatusOr<std::unique_ptr<AutoCompression>> Create(
      AutoCompressionOptions options, std::vector<std::string> group_names,
      std::vector<uint64_t> group_numel, std::vector<uint32_t> chunk_group);
  ~AutoCompression();

  // The compressor of chunk `key` for the step under way.
  const Compressor& CompressorFor(uint64_t key) const;

  // Chunk `key`'s squared L2 norms this step: of its gradient and of its
  // residual after compression.
  void NoteChunkNorms(uint64_t key, double gradient_squares,
                      double residual_squares);
  // One transfer of `bytes` payload bytes in `seconds`.
  void ObserveTransfer(uint64_t bytes, double seconds);
  // The last step's seconds of computation and of its backward pass, noted
  // at the start of each Step(); the time between two notes is a whole
  // step's, which verifies the choice (compression_chooser.h).
  void NoteCompute(double compute_seconds, double backward_seconds);
  // Running totals since the worker started counting (CpuAccount): the
  // training thread's CPU seconds of computation, the CPU seconds spent on
  // work that grows with the payload bytes (encode, rpc, decode), and the
  // payload bytes pushed and pulled. Noted once per step; the differences
  // between notes are used. Totals that go backwards are ignored.
  void NoteCpu(double compute_cpu_seconds, double byte_cpu_seconds,
               double payload_bytes);
  // Wire bytes per payload byte, as measured (ignored unless >= 1).
  void NoteWireRatio(double ratio);

  // Evaluates the choice for step `step`, at learning rate `learning_rate`
  // (0: unknown), from what was noted since the last call.
  void BeginStep(uint64_t step, double learning_rate);

  const AutoCompressionReport& report() const { return report_; }

 private:
  struct Metrics;
  AutoCompression(AutoCompressionOptions options,
                  std::vector<std::string> group_names,
                  std::vector<uint64_t> group_numel,
                  std::vector<uint32_t> chunk_group,
                  std::vector<std::unique_ptr<const Compressor>> rungs);
  // The group statistics noted since the last evaluation, and the model's
  // gradient norm.
  std::vector<GroupStatistics> TakeStatistics(double* model_norm);
  void Record(uint64_t step, const ChooserInputs& inputs);

  const AutoCompressionOptions options_;
  const std::vector<uint32_t> chunk_group_;
  // One compressor per rung.
  const std::vector<std::unique_ptr<const Compressor>> rung_compressors_;
  LinkEstimator link_;
  CompressionChooser chooser_;
  CriticalPhaseDetector critical_;
  std::unique_ptr<Metrics> metrics_;

  // Written per chunk by the compressing threads (distinct keys).
  std::vector<double> gradient_squares_;
  std::vector<double> residual_squares_;
  std::vector<uint8_t> noted_;  // Not vector<bool>: written concurrently.

  // The training thread's.
  double compute_seconds_ = 0;
  double backward_seconds_ = 0;
  // The last step's seconds, and their smoothed value.
  double step_seconds_ = 0;
  double smoothed_step_seconds_ = 0;
  // From NoteCpu: the smoothed per-step CPU compute and CPU per byte, and
  // the totals of the last note (negative: none yet).
  double cpu_compute_seconds_ = 0;
  double cpu_seconds_per_byte_ = 0;
  double last_compute_cpu_ = -1;
  double last_byte_cpu_ = -1;
  double last_payload_bytes_ = -1;
  absl::Time last_compute_note_ = absl::InfinitePast();
  int compute_notes_ = 0;
  double wire_ratio_ = 1.3;
  AutoCompressionReport report_;
  // Record every this many steps (doubled each time the history is
  // thinned).
  uint64_t record_stride_ = 1;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_AUTO_COMPRESSION_H_
