// What a ParameterSync (parameter_sync.h) is made of: the job (shards,
// workers, compression, the training config the shards run), the
// connection to the shards (ClientOptions, client/client_options.h) and the
// node's ranks (LocalGroupOptions, local_group.h). The last two are
// embedded whole, so that every deadline, retry and size limit of the
// client and the group can be set here and reaches them unchanged.
//
//   gradwire::SyncOptions options;
//   options.shard_addresses = {"10.0.0.1:7000", "10.0.0.2:7000"};
//   options.client.worker_id = rank;  options.num_workers = world;
//   options.client.max_message_bytes = 256 << 20;   // as the shards'
//   options.local.size = 4;  options.local.rank = local_rank;
//
// sync_settings.h builds one from names ("topk", "ssp", ...) as the
// flags of gradwire-worker and the Python keywords give them.
//
// Thread safety: plain values.
#ifndef GRADWIRE_WORKER_SYNC_OPTIONS_H_
#define GRADWIRE_WORKER_SYNC_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/client_options.h"
#include "common/compress/compressor.h"
#include "common/compress/momentum_correction.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/local_group.h"

namespace gradwire {
namespace metrics {
class Registry;
}  // namespace metrics

// The client settings a worker starts from: ClientOptions' defaults, except
// that a Pull may wait 300 s for its step (a BSP pull waits for the slowest
// worker, which may be evaluating or checkpointing meanwhile).
inline ClientOptions WorkerClientDefaults() {
  ClientOptions options;
  options.pull_timeout = absl::Seconds(300);
  return options;
}

struct SyncOptions {
  // One address (host:port) per shard, in shard-id order.
  std::vector<std::string> shard_addresses;
  // The number of nodes; this node's id is client.worker_id, in
  // [0, num_workers).
  uint32_t num_workers = 1;
  // Gradient compression; error feedback wraps it unless disabled.
  // compressor.name "auto" chooses a rung per layer each step
  // (auto_compression.h) so that the pushed bytes fit in auto_budget times
  // the backward pass's time on the measured link.
  CompressorOptions compressor;
  bool error_feedback = true;
  double auto_budget = 1.0;
  // Largest chunk, in bytes of float32.
  uint64_t partition_bytes = uint64_t{4} << 20;
  // Threads that compress the chunks of one push in parallel (the pushing
  // thread among them); 0: one per core this process may run on
  // (UsableCpus). CUDA chunks compressed on their device run one
  // after another.
  int compress_threads = 0;
  // With overlap (ParameterSync::GradientReady): the gradients announced
  // during backward() are compressed and pushed once those not yet pushed
  // hold at least this many bytes of float32, like DDP's buckets; the rest
  // at Step(). Each push costs a request per shard each way (the pull
  // ahead follows the push), so pushing the first small gradients alone
  // costs CPU and carries almost nothing. 0: push whatever was announced
  // as soon as the pushing thread is free.
  uint64_t push_bucket_bytes = uint64_t{1} << 20;
  // Chunks of FeedbackState::kSpareFrom floats and more keep a second
  // error-feedback residual buffer, so that the non-finite check of a
  // gradient rides in the pass that adds it (4 more bytes per element of
  // those chunks); false: a check pass of its own, the residual updated in
  // place (less memory, one more read of each gradient).
  bool residual_spare = true;
  // Optimizer, consistency mode and pull encoding the shards run. Its
  // num_workers, num_shards, partition_bytes and model_fingerprint are
  // filled in by Register, and so is what is left unset: mode BSP,
  // optimizer SGD, learning rate 0.01, constant schedule, and (with
  // pull_deltas) Top-K 5% fp32 deltas (training_defaults.h).
  v1::TrainingConfig training;
  // Momentum applied here, before compression, when the shards run plain
  // SGD (sync_settings.h decides; common/compress/momentum_correction.h).
  // Off by default.
  MomentumCorrectionOptions worker_momentum;
  // The momentum folded into the shards' learning rate (SGD at
  // fold_scale * lr / (1 - m) on the shards; sync_settings.h), for the
  // log; 0: none.
  float folded_momentum = 0.0f;
  float fold_scale = 1.0f;
  // Ask for compressed deltas on pulls (needs training.pull_encoding).
  bool pull_deltas = true;
  // Pull ahead, with overlap (ParameterSync::GradientReady): each chunk's
  // new weights are pulled on a background thread as soon as its gradient
  // is pushed, and Step() returns without waiting for them, so that pulls
  // overlap the rest of the backward pass and the next forward pass. The
  // training loop must then call AwaitParameter(i) before it reads
  // parameter i (the trainer's models do so before each layer, as a
  // forward pre-hook does in Python) and AwaitWeights() before it reads
  // them otherwise (evaluation, checkpoints). Off by default: a loop that
  // reads its parameters without awaiting them would race with the pulls.
  bool pull_ahead = false;
  // The connection to the shards, as GrpcPsClient takes it: this worker's
  // id, the deadlines of each RPC and of connecting, the retry policy, the
  // largest message (match the shards' --max-message-bytes), TLS and the
  // bearer token (LoadTransportSecurity reads them from files). Connect
  // validates it (ValidateClientOptions); Create uses only worker_id.
  ClientOptions client = WorkerClientDefaults();
  // The ranks on this host. size 1: no intra-node reduction. timeout bounds
  // the rendezvous and every collective.
  LocalGroupOptions local;
  // Where to export this worker's Prometheus metrics (worker_metrics.h);
  // not owned, must outlive the ParameterSync. Null: no metrics.
  metrics::Registry* metrics_registry = nullptr;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SYNC_OPTIONS_H_
