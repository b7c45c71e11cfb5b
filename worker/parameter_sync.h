// gradwire's public worker API: the few lines a user adds to their own
// libtorch training loop.
//
//   gradwire::SyncOptions options;                        // sync_options.h
//   options.shard_addresses = {"10.0.0.1:7000", "10.0.0.2:7000"};
//   options.client.worker_id = rank;  options.num_workers = world;
//   options.compressor.name = "topk";  options.compressor.ratio = 0.01;
//   auto sync = gradwire::ParameterSync::Connect(options);   // StatusOr
//   (*sync)->Register(model->named_parameters());            // Init shards
//   for (...) {
//     loss.backward();
//     (*sync)->Step();     // reduce, compress + EF, push, pull, write weights
//   }
//
// Step() replaces the local optimizer: the shards run it. Parameters must be
// contiguous float32 CPU or CUDA tensors. CPU gradients are compressed in
// place; CUDA gradients on their device, with the error-feedback residual
// kept there, when gradwire was built with the CUDA kernels and the
// compressor runs there (see worker/device_chunks.h), else through the host.
//
// What one Step does (each part in a file of its own, named below):
//  1. With local ranks (options.local.size > 1): average the gradients inside
//     the node (c10d Gloo), so the shards see one worker per node.
//  2. For each chunk this local rank owns (key % local size == local rank,
//     chunk_plan.h): compress its gradient with error feedback (one
//     residual per chunk), encode it (push_request_builder.h), and push it
//     to the chunk's shard; shards in parallel.
//  3. Pull the chunks, waiting for the step the consistency mode requires
//     (common/consistency/consistency_rule.h); apply deltas to, or
//     overwrite, the parameters in place (pulled_weights.h). With pull
//     ahead (SyncOptions::pull_ahead, with GradientReady) each chunk is
//     pulled on a thread of its own as soon as it is pushed, and Step()
//     returns without waiting: the loop awaits each parameter before it
//     reads it (AwaitParameter), so the pulls overlap the rest of the
//     backward pass and the start of the next forward pass.
//  4. With local ranks: share the pulled weights inside the node
//     (node_broadcast.h).
// Register fills in the training config's defaults (training_defaults.h)
// and Inits the shards (init_requests.h).
//
// Thread safety: not thread-safe; one training loop drives it.
#ifndef GRADWIRE_WORKER_PARAMETER_SYNC_H_
#define GRADWIRE_WORKER_PARAMETER_SYNC_H_

#include <c10/util/Exception.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "worker/auto_compression.h"
#include "worker/cpu_account.h"
#include "worker/sync_options.h"
#include "worker/sync_stats.h"

namespace gradwire {

class ChunkPipeline;
class ChunkPlan;
class ConsistencyRule;
class DenseEquivalent;
class LocalGroup;
class PushRequestBuilder;
class WorkerMetrics;

class ParameterSync {
 public:
  using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

  // Connects to every shard over gRPC as options.client says (deadlines,
  // retries, message limit, TLS and token) and, with local ranks, forms the
  // node's group as options.local says (rendezvous and collective timeout
  // included). INVALID_ARGUMENT for bad options, naming the field
  // (ValidateClientOptions, LocalGroup::Create, the compressor);
  // UNAVAILABLE when a shard cannot be reached within
  // options.client.connect_timeout.
  static absl::StatusOr<std::unique_ptr<ParameterSync>> Connect(
      SyncOptions options);
  // The same over an existing client (tests use an in-memory one); of
  // options.client only worker_id is read.
  static absl::StatusOr<std::unique_ptr<ParameterSync>> Create(
      SyncOptions options, std::unique_ptr<PsClient> client);

  ~ParameterSync();
  ParameterSync(const ParameterSync&) = delete;
  ParameterSync& operator=(const ParameterSync&) = delete;

  // Declares the parameters (names and sizes fix the chunk plan; every
  // worker must register the same list in the same order) and Inits every
  // shard with their current values. The shards keep the first Init's
  // values: after Register the parameters hold the shards' weights. Resumes
  // at the step the shards have recorded for this worker.
  absl::Status Register(const NamedTensors& parameters);
  // The same, with the tensors whose `uncompressed` entry is true pushed
  // without compression (every nonzero element at fp32, no error feedback:
  // ChunkSlot::uncompressed). `uncompressed` has one entry per parameter.
  absl::Status Register(const NamedTensors& parameters,
                        std::vector<bool> uncompressed);
  absl::Status Register(
      const torch::OrderedDict<std::string, torch::Tensor>& parameters);

  // One synchronous step; see the file comment. `epoch` feeds compressor
  // warm-up schedules. On error the parameters may hold a mix of old and
  // new chunks; the step can be retried: call Step() again, gradients
  // unchanged (after GradientReady too). A retry counts the gradient once,
  // however many pushes or pulls failed: the chunks compressed for this
  // step send the same message again (ChunkSlot::scratch_step), which the
  // shards apply once, so residuals and velocities move once; the others
  // are compressed then.
  absl::Status Step(int epoch = 0);

  // Step() in which only the registered tensors at `carried` (indices in
  // registration order) hold gradients: every other tensor's chunks push
  // nothing (an empty chunk; its gradient is not read and may be
  // undefined, its residual and velocity stay as they are, and its
  // weights are not kept in its gradient), and only the carried tensors
  // are reduced inside the node. For an exchange within a step that moves
  // a few small tensors (PowerSGD's second factor), whose cost must not be
  // the model's. Under optimizer MEAN only the carried tensors are pulled.
  // Every local rank passes the same list; a retry passes it again.
  // INVALID_ARGUMENT for an index out of range, FAILED_PRECONDITION while
  // overlap announced the step's gradients.
  absl::Status StepCarrying(int epoch, const std::vector<uint32_t>& carried);

  // Overlap of communication with the backward pass: says that the
  // gradient of parameter `index` (registration order) is final for this
  // step, and has its chunks compressed and pushed on a background thread
  // at once, while backward() goes on with the other parameters (a
  // gradient hook calls this); announced gradients are pushed together
  // once they hold options.push_bucket_bytes (SyncOptions), and the rest
  // at Step(). The gradient must not change until Step(),
  // which pushes the parameters not announced (a missing gradient pushes
  // zeros), waits for every push and pulls. Compression and pushes are
  // the same as without overlap, so the weights are too.
  // Errors: FAILED_PRECONDITION before Register, with local ranks
  // (options.local.size > 1: the node reduces whole steps), or for a parameter
  // already announced this step; INVALID_ARGUMENT for an index out of
  // range. A failed push is returned by the next Step(), and retried as
  // Step() says.
  absl::Status GradientReady(size_t index, int epoch = 0);

  // With pull ahead (options.pull_ahead, SyncOptions), the pulls of the
  // last Step() may still be in flight: AwaitParameter blocks until the
  // new weights of parameter `index` (registration order) have landed, and
  // AwaitWeights until every pull has. Both return at once when nothing is
  // in flight, and both return a failed pull's error (the parameters may
  // then hold a mix of old and new chunks; the next Step() fails too).
  // INVALID_ARGUMENT for an index out of range.
  absl::Status AwaitParameter(size_t index);
  absl::Status AwaitWeights();
  // Turns pull ahead on or off between steps (SyncOptions::pull_ahead is
  // the setting at construction); off first awaits the pulls in flight and
  // returns their error. FAILED_PRECONDITION between the first
  // GradientReady of a step and its Step().
  absl::Status SetPullAhead(bool on);
  bool pull_ahead() const { return pull_pipeline_ != nullptr; }

  // Keeps the weights of before each step's pulls in the gradients: once a
  // step's pushes are done (the gradients are spent), every registered
  // tensor's gradient gets a copy of the tensor, and the pulls then move
  // the tensors. A caller that registered aggregation buffers (gradwire's
  // DistributedOptimizer) reads the step's mean gradient as the gradient
  // minus the tensor, without a copy of the model of its own. Once per
  // step: a Step() retried after a failed pull keeps the first copy, which
  // the pulls that did land no longer hold. FAILED_PRECONDITION with pull
  // ahead (the pulls start before the pushes end) or local ranks (a retry
  // would reduce the copies), or between a step's first GradientReady and
  // its Step().
  absl::Status SetKeepWeightsInGradients(bool on);

  // Keeps, from the next step on, a copy of each compressed chunk's
  // error-feedback residual as it was before the step (4 bytes per
  // element, on the chunk's device; a pass over it per step), so that
  // RestoreResiduals can undo the step. Off, the copies are freed as
  // their chunks are next compressed. FAILED_PRECONDITION between a
  // step's first GradientReady and its Step().
  absl::Status SetKeepResiduals(bool on);
  // Undoes the last Step()'s error feedback: the residuals of the chunks
  // this worker compressed in it go back to what they were before it, for
  // a step the caller discards (every worker skips a step whose gradients
  // were not finite on one of them, as DDP with a GradScaler does), so
  // that what it pushed is neither kept for later nor counted as sent.
  // Works without SetKeepResiduals for chunks whose residual was still
  // empty (a job's first step). Returns how many chunks it could not
  // restore (compressed without a copy). Velocities (dgc, momentum on the
  // worker) are not restored. FAILED_PRECONDITION before the first Step()
  // or between a step's first GradientReady and its Step().
  absl::StatusOr<int> RestoreResiduals();

  // Checkpoints (worker_state.h): SaveState serializes this worker's
  // compression state (error-feedback residuals, DGC and worker-momentum
  // velocities) with the step it belongs to; the model's own weights and
  // optimizer are the caller's to save. After a restart, LoadState puts it
  // back right after Register, before the first Step. It awaits pulls in
  // flight first. Errors: FAILED_PRECONDITION before Register or between a
  // step's first GradientReady and its Step(); LoadWorkerState's errors for
  // a state of another job, worker or step (nothing changes then).
  absl::StatusOr<std::string> SaveState();
  absl::Status LoadState(const std::string& state);

  // The next step number (steps pushed so far, including resumed ones).
  uint64_t step() const { return step_; }
  // The options this object was built with, resolved.
  const SyncOptions& options() const { return options_; }
  const SyncStats& stats() const { return stats_; }
  // The worker's metrics (null without options.metrics_registry); the
  // training loop sets its loss, throughput and epoch there.
  WorkerMetrics* metrics() const { return metrics_.get(); }
  // What compressor "auto" chose, step by step (auto_compression.h); null
  // for another compressor or before Register.
  const AutoCompressionReport* auto_compression() const;
  // The L2 norm of this worker's error-feedback residuals now, over every
  // chunk it handles (0 before Register or before any is kept). A pass over
  // every residual (4 bytes per element read), unlike the metric
  // gradwire_worker_residual_norm, which is refreshed every few seconds;
  // call it between steps.
  double ResidualNorm() const;
  // The TCP stream bytes of this worker's connections to the shards since
  // Connect, as the kernel counts them (client/wire_totals.h): the payload
  // that stats() counts plus HTTP/2, gRPC and TLS framing. Unknown where
  // the transport cannot say (Unix sockets, an in-memory client). Reads
  // the kernel's counters now: a few system calls per connection.
  WireTotals WireBytes() const { return client_->wire_bytes(); }
  // The wire bytes of the last finished Step(): from the end of the one
  // before it (or of Register) to its end, so pushes announced with
  // GradientReady count in their step; with pull ahead, pulls still in
  // flight when Step() returns count in the next one. Unknown before the
  // first Step() and wherever WireBytes() is.
  const WireTotals& StepWireBytes() const { return step_wire_bytes_; }
  // The payload beside it: the client's serialized bytes by RPC, every
  // attempt (PsClient::traffic()).
  TrafficStats Traffic() const { return client_->traffic(); }
  // The CPU of every step, by activity, against the training thread's
  // compute (cpu_account.h): counted from the end of Register, each step
  // closed at the end of Step(). Totals() may be read from any thread.
  const CpuAccount& cpu_account() const { return cpu_account_; }

 private:
  // Seconds of one batch of pushed chunks.
  struct PushTimings {
    double compress_seconds = 0;
    double push_seconds = 0;
  };

  ParameterSync(SyncOptions options, std::unique_ptr<PsClient> client,
                std::unique_ptr<LocalGroup> group,
                std::unique_ptr<PushRequestBuilder> push_builder,
                std::unique_ptr<WorkerMetrics> metrics);

  // Inits every shard (init_exchange.h: values only where a shard asks for
  // them), resumes at the step they recorded, pulls the chunks whose values
  // differ from the shards' and records the start-up since
  // `register_start`.
  absl::Status InitShards(absl::Time register_start);
  // Without overlap: gives a missing gradient zeros, averages the gradients
  // inside the node and pushes every chunk this local rank handles.
  absl::Status ReduceAndPush(int epoch);
  // Compresses, encodes and pushes the chunks `keys` of step_ (one request
  // per shard), adding its seconds to *timings.
  absl::Status CompressAndPush(const std::vector<uint64_t>& keys, int epoch,
                               PushTimings* timings);
  // With overlap: queues the chunks of parameter `index` on pipeline_,
  // weighing their fp32 bytes towards options_.push_bucket_bytes.
  void EnqueuePush(size_t index);
  // With overlap: pushes the parameters not announced and waits for every
  // push of this step.
  absl::Status FinishOverlappedPush();
  // With pull ahead: pulls the chunks `keys`, pushed for step pull_step_,
  // and writes their weights (on the pull pipeline's thread).
  absl::Status PullAhead(const std::vector<uint64_t>& keys);
  // Adds one step's dense-equivalent bytes and the client's push traffic to
  // stats_.
  void CountPushed(const PushTimings& timings);
  // Pulls every chunk this local rank handles, waiting for clock
  // `min_step`, and writes them; returns the smallest chunk clock
  // answered.
  absl::StatusOr<uint64_t> PullWeights(uint64_t min_step);
  // The same for the chunks `keys` (of this local rank) only.
  absl::StatusOr<uint64_t> PullChunks(const std::vector<uint64_t>& keys,
                                      uint64_t min_step);
  // Accounts for the pulls of step `step`, whose smallest chunk clock was
  // `min_clock`, in stats_.max_step_lead.
  void NotePulled(uint64_t step, uint64_t min_clock);
  // SetKeepWeightsInGradients' copy, once per step, after the pushes.
  void KeepWeightsInGradients();
  // Exports one finished step (stats before it: `before`) to metrics_.
  void RecordStepMetrics(const SyncStats& before, double step_seconds);
  // Starts the pushes of step_: compressor "auto" chooses its rungs.
  void BeginPushes();
  // Compressor "auto": the computation since the last step ended, up to
  // `step_start` (Step's call), and its backward part; and one transfer.
  void NoteCompute(absl::Time step_start);
  void NoteTransfer(uint64_t bytes, double seconds);
  // Compressor "auto": the last step's wire bytes per payload byte (stats
  // before it: `before`), where the client counts wire bytes.
  void NoteWireRatio(const SyncStats& before);

  // Constant after construction.
  const SyncOptions options_;
  // Declared before everything whose threads enter its scopes (the
  // builder's pool, the pipelines), so that it outlives them.
  CpuAccount cpu_account_;
  const std::unique_ptr<PsClient> client_;
  const std::unique_ptr<LocalGroup> group_;
  const std::unique_ptr<PushRequestBuilder> push_builder_;
  // What the consistency mode (options_.training) makes a pull wait for.
  const std::unique_ptr<ConsistencyRule> rule_;
  const std::unique_ptr<WorkerMetrics> metrics_;

  // Set by Register.
  std::unique_ptr<ChunkPlan> plan_;
  std::unique_ptr<DenseEquivalent> dense_equivalent_;

  // Pull ahead: exists while it is on (SetPullAhead). Its
  // jobs are enqueued by pipeline_'s job once their chunks are pushed; from
  // the first announcement of a step until AwaitWeights, only its thread
  // touches the pulled chunks' slots and parameters, pull_step_ and
  // pull_tally_ (the client takes concurrent calls). AwaitWeights hands
  // them back. Declared before pipeline_, whose queued jobs enqueue here
  // until it is destroyed.
  std::unique_ptr<ChunkPipeline> pull_pipeline_;
  bool pulls_in_flight_ = false;
  uint64_t pull_step_ = 0;  // The step the pulls in flight were pushed for.
  struct PullTally {
    double seconds = 0;
    uint64_t min_clock = std::numeric_limits<uint64_t>::max();
  };
  PullTally pull_tally_;

  // Overlap (GradientReady): created on first use. While a step's pushes
  // are queued, only the pipeline thread touches the announced chunks'
  // slots, push_builder_, the client and overlap_timings_; Drain() hands
  // them back.
  std::unique_ptr<ChunkPipeline> pipeline_;
  std::vector<bool> announced_;  // Per parameter, this step.
  bool step_announced_ = false;
  int overlap_epoch_ = 0;
  PushTimings overlap_timings_;

  uint64_t step_ = 0;
  // StepCarrying's tensors, per registered tensor, while its step runs;
  // empty: every tensor carries.
  std::vector<bool> carried_;
  bool Carries(size_t tensor) const {
    return carried_.empty() || carried_[tensor];
  }
  // SetKeepWeightsInGradients; the step whose copy the gradients hold.
  bool keep_weights_in_gradients_ = false;
  std::optional<uint64_t> weights_kept_at_step_;
  SyncStats stats_;
  // Compressor "auto"'s compute timings: when the last step (or Register)
  // returned, and when this step's first gradient was announced.
  absl::Time last_step_end_ = absl::InfinitePast();
  absl::Time first_announced_at_ = absl::InfinitePast();
  // WireBytes() at the end of Register and of the last Step(), and that
  // step's share.
  WireTotals wire_at_step_end_;
  WireTotals step_wire_bytes_;
  // The residual norm gauge, recomputed at most once per
  // kResidualNormRefresh: a pass over every residual each step costs a
  // noticeable share of a worker's CPU, for a gauge scraped every few
  // seconds (docs/benchmarks/step-time.md#the-demo-against-ddp).
  absl::Time residual_norm_at_ = absl::InfinitePast();
  double residual_norm_ = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_PARAMETER_SYNC_H_
