// gradwire's public worker API: the few lines a user adds to their own
// libtorch training loop.
//
//   gradwire::SyncOptions options;
//   options.shard_addresses = {"10.0.0.1:7000", "10.0.0.2:7000"};
//   options.worker_id = rank;  options.num_workers = world;
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
// What one Step does:
//  1. With local ranks (options.local.size > 1): average the gradients inside
//     the node (c10d Gloo), so the shards see one worker per node.
//  2. For each chunk this local rank owns (key % local size == local rank):
//     compress its gradient with error feedback (one residual per chunk),
//     encode it, and push it to the chunk's shard; shards in parallel.
//  3. Pull the chunks, waiting for the step the consistency mode requires;
//     apply deltas to, or overwrite, the parameters in place.
//  4. With local ranks: share the pulled weights inside the node.
//
// Thread safety: not thread-safe; one training loop drives it.
#ifndef GRADWIRE_WORKER_PARAMETER_SYNC_H_
#define GRADWIRE_WORKER_PARAMETER_SYNC_H_

#include <c10/util/Exception.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compress/compressor.h"
#include "common/tls/transport_security.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/ps_client.h"

namespace gradwire {
namespace metrics {
class Registry;
}  // namespace metrics

class DeviceChunkCompressor;
class LocalGroup;
class Partition;
class PushPipeline;
class WorkerMetrics;

struct SyncOptions {
  // One address (host:port) per shard, in shard-id order.
  std::vector<std::string> shard_addresses;
  // This node's id in [0, num_workers) and the number of nodes.
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  // Gradient compression; error feedback wraps it unless disabled.
  CompressorOptions compressor;
  bool error_feedback = true;
  // Largest chunk, in bytes of float32.
  uint64_t partition_bytes = uint64_t{4} << 20;
  // Optimizer, consistency mode and pull encoding the shards run. Its
  // num_workers, num_shards, partition_bytes and model_fingerprint are
  // filled in by Register, and so is what is left unset: mode BSP,
  // optimizer SGD, learning rate 0.01, constant schedule, and (with
  // pull_deltas) Top-K 5% fp32 deltas.
  v1::TrainingConfig training;
  // Ask for compressed deltas on pulls (needs training.pull_encoding).
  bool pull_deltas = true;
  // Ranks on this host. size 1: no intra-node reduction.
  int local_rank = 0;
  int local_size = 1;
  std::string local_store_host = "127.0.0.1";
  int local_store_port = 29500;
  // Deadlines and retries of the RPCs.
  absl::Duration rpc_timeout = absl::Seconds(30);
  absl::Duration pull_timeout = absl::Seconds(300);
  // How long Connect waits for every shard's channel to be ready.
  absl::Duration connect_timeout = absl::Seconds(30);
  // TLS and bearer token of the shard connections (ClientOptions::transport;
  // LoadTransportSecurity reads them from files). Default: plaintext.
  TransportSecurity transport;
  // Where to export this worker's Prometheus metrics (worker_metrics.h);
  // not owned, must outlive the ParameterSync. Null: no metrics.
  metrics::Registry* metrics_registry = nullptr;
};

// Byte counts of this worker, serialized message sizes.
struct SyncStats {
  uint64_t steps = 0;
  uint64_t pushed_bytes = 0;
  uint64_t pulled_bytes = 0;
  // What fp32 dense pushes of the same gradients would have cost.
  uint64_t dense_equivalent_bytes = 0;
  uint64_t init_bytes = 0;
  uint64_t retries = 0;
  // The most steps this worker ran ahead of the slowest one, as its pulls
  // saw it: step + 1 - the smallest chunk clock pulled (0 in BSP; at most
  // the staleness in SSP).
  uint64_t max_step_lead = 0;
  // Seconds spent in each phase, summed over steps.
  double reduce_seconds = 0;
  double compress_seconds = 0;
  double push_seconds = 0;
  double pull_seconds = 0;
};

class ParameterSync {
 public:
  using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

  // Connects to every shard (gRPC) and, with local ranks, forms the node's
  // group. UNAVAILABLE when a shard cannot be reached in time.
  static absl::StatusOr<std::unique_ptr<ParameterSync>> Connect(
      SyncOptions options);
  // The same over an existing client (tests use an in-memory one).
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
  absl::Status Register(
      const torch::OrderedDict<std::string, torch::Tensor>& parameters);

  // One synchronous step; see the file comment. `epoch` feeds compressor
  // warm-up schedules. On error the parameters may hold a mix of old and
  // new chunks; the step can be retried.
  absl::Status Step(int epoch = 0);

  // Overlap of communication with the backward pass: says that the
  // gradient of parameter `index` (registration order) is final for this
  // step, and has its chunks compressed and pushed on a background thread
  // at once, while backward() goes on with the other parameters (a
  // gradient hook calls this). The gradient must not change until Step(),
  // which pushes the parameters not announced (a missing gradient pushes
  // zeros), waits for every push and pulls. Compression and pushes are
  // the same as without overlap, so the weights are too.
  // Errors: FAILED_PRECONDITION before Register, with local ranks
  // (local_size > 1: the node reduces whole steps), or for a parameter
  // already announced this step; INVALID_ARGUMENT for an index out of
  // range. A failed push is returned by the next Step().
  absl::Status GradientReady(size_t index, int epoch = 0);

  // The next step number (steps pushed so far, including resumed ones).
  uint64_t step() const { return step_; }
  const SyncStats& stats() const { return stats_; }
  // The worker's metrics (null without options.metrics_registry); the
  // training loop sets its loss, throughput and epoch there.
  WorkerMetrics* metrics() const { return metrics_.get(); }

 private:
  struct ChunkSlot;
  ParameterSync(SyncOptions options, std::unique_ptr<PsClient> client,
                std::unique_ptr<LocalGroup> group);

  // Seconds of one batch of pushed chunks.
  struct PushTimings {
    double compress_seconds = 0;
    double push_seconds = 0;
  };

  absl::Status InitShards();
  absl::Status PushGradients(int epoch);
  // Compresses, encodes and pushes the chunks `keys` of step_ (one request
  // per shard), adding its seconds to *timings.
  absl::Status CompressAndPush(const std::vector<uint64_t>& keys, int epoch,
                               PushTimings* timings);
  // With overlap: pushes the parameters not announced and waits for every
  // push of this step.
  absl::Status FinishOverlappedPush();
  // Adds one step's dense-equivalent bytes and the client's push traffic to
  // stats_.
  void CountPushed(const PushTimings& timings);
  // Compresses one chunk's gradient into slot->scratch: on the device, or
  // through the CPU compressor.
  absl::Status CompressChunk(const torch::Tensor& gradient,
                             const CompressContext& context, ChunkSlot* slot);
  absl::Status PullWeights(uint64_t min_step);
  absl::Status ApplyPulled(const std::vector<v1::PullResponse>& responses);
  absl::Status ShareInsideNode();
  uint64_t MinStepToPull() const;
  // Exports one finished step (stats before it: `before`) to metrics_.
  void RecordStepMetrics(const SyncStats& before, double step_seconds);
  double ResidualNorm() const;
  bool OwnsLocally(uint64_t key) const;

  SyncOptions options_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<LocalGroup> group_;
  std::unique_ptr<const Compressor> compressor_;
  // CUDA gradients compressed on the device; null when there are no CUDA
  // parameters or they go through the host.
  std::unique_ptr<DeviceChunkCompressor> device_compressor_;
  std::unique_ptr<Partition> partition_;
  std::vector<torch::Tensor> parameters_;
  std::vector<ChunkSlot> slots_;  // Indexed by chunk key.
  // The chunk keys of each parameter that this local rank pushes.
  std::vector<std::vector<uint64_t>> owned_keys_;
  // Overlap (GradientReady): created on first use. While a step's pushes
  // are queued, only the pipeline thread touches the announced chunks'
  // slots, the client and overlap_timings_; Drain() hands them back.
  std::unique_ptr<PushPipeline> pipeline_;
  std::vector<bool> announced_;  // Per parameter, this step.
  bool step_announced_ = false;
  int overlap_epoch_ = 0;
  PushTimings overlap_timings_;
  // Dense fp32 push requests of the same chunks, for dense_equivalent_bytes.
  std::vector<v1::PushRequest> dense_equivalent_;
  uint64_t step_ = 0;
  // The smallest chunk clock the last pull answered (for max_step_lead).
  uint64_t pulled_min_clock_ = 0;
  SyncStats stats_;
  std::unique_ptr<WorkerMetrics> metrics_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_PARAMETER_SYNC_H_
