// The registered model as ParameterSync works on it: the parameters cut
// into chunks and placed on the shards (common/partition/partition.h), which
// chunks this local rank handles (key % local size == local rank: it
// compresses and pushes their gradients and pulls their weights, then
// broadcasts them to the node), and one slot of worker state per chunk.
//
//   auto plan = ChunkPlan::Build(named_tensors, options);  // StatusOr
//   for (uint64_t key : (*plan)->AllOwnedKeys()) { ... (*plan)->slot(key) }
//
// Thread safety: not thread-safe. ParameterSync hands the slots of the
// chunks its push and pull pipelines (chunk_pipeline.h) work on to their
// threads until they drain; a push reads a slot's residual, a pull writes
// its version and epoch, and no chunk is in both at once.
#ifndef GRADWIRE_WORKER_CHUNK_PLAN_H_
#define GRADWIRE_WORKER_CHUNK_PLAN_H_

#include <torch/types.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/partition/partition.h"

namespace gradwire {

// ChunkSlot::scratch_step when the scratch holds no step's message.
inline constexpr uint64_t kNotCompressed = std::numeric_limits<uint64_t>::max();

// What this worker keeps about one chunk.
struct ChunkSlot {
  ChunkSpec spec;
  // The error-feedback residual of the chunk's gradient (host compression;
  // residuals on a CUDA device live in DeviceChunkCompressor).
  FeedbackState feedback;
  // The velocity of momentum on the worker (momentum_correction.h), and
  // Nesterov's input to the compressor; empty unless that runs here.
  std::vector<float> velocity;
  std::vector<float> momentum_input;
  // Pushed without compression (every nonzero element at fp32, no error
  // feedback or momentum): the tensor was registered as uncompressed, as
  // the buffers that DistributedOptimizer broadcasts are.
  bool uncompressed = false;
  // The chunk's last compressed gradient; reused to avoid allocations.
  CompressedChunk scratch;
  // The step whose message `scratch` holds, complete (kNotCompressed: none,
  // or a compression that failed). A push of the same step again (Step()
  // retried after a failed push or pull) sends `scratch` again instead of
  // compressing: compressing moves the residual and the velocities, so a
  // second one would count the gradient twice, while the shards apply the
  // same message once (they dedupe by worker, step and chunk). Keeping the
  // message costs nothing (the scratch is kept anyway); restoring the
  // residual and velocities instead would copy 4 to 12 bytes per element
  // every step, on the device too.
  uint64_t scratch_step = kNotCompressed;
  // The residual as it was before the compression of step `kept_step`
  // (kNotCompressed: no copy), for a step the caller discards
  // (ParameterSync::RestoreResiduals): a copy kept while
  // PushRequestBuilder::set_keep_residuals is on, or a free one of a
  // residual that was still empty. On the host, or on the chunk's CUDA
  // device for chunks compressed there.
  std::vector<float> kept_residual;
  torch::Tensor kept_device_residual;
  uint64_t kept_step = kNotCompressed;
  // Version of the weights this worker holds (kHoldsNothing: none).
  uint64_t version = 0;
  // The shard's history epoch that `version` counts in: the history_epoch of
  // the pull answer that brought the chunk to it (0: none, so the next pull
  // answers dense weights). Sent back with every pull, since a shard that
  // restarted repeats version numbers with other weights.
  uint64_t epoch = 0;
};

// The version a worker reports when it holds nothing a delta applies to:
// no chunk reaches it, so the shard answers with dense weights.
inline constexpr uint64_t kHoldsNothing = std::numeric_limits<uint64_t>::max();

struct ChunkPlanOptions {
  // Largest chunk, in bytes of float32 (PartitionOptions::partition_bytes).
  uint64_t partition_bytes = uint64_t{4} << 20;
  uint32_t num_shards = 1;
  // This process's rank among the node's local_size ranks.
  int local_rank = 0;
  int local_size = 1;
  // Whether large chunks' residuals may keep a spare buffer
  // (FeedbackState::spare_from; SyncOptions::residual_spare).
  bool residual_spare = true;
  // Per registered tensor, whether its chunks are pushed uncompressed
  // (ChunkSlot::uncompressed); empty: none is. Otherwise one entry per
  // tensor.
  std::vector<bool> uncompressed;
};

class ChunkPlan {
 public:
  using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

  // Plans `parameters` (kept by reference: the tensors are shared with the
  // caller, whose values and gradients the worker reads and writes).
  // INVALID_ARGUMENT naming the parameter when one is not a contiguous
  // float32 CPU or CUDA tensor, or when options.uncompressed has another
  // size than `parameters`; Partition::Build's errors otherwise.
  static absl::StatusOr<std::unique_ptr<ChunkPlan>> Build(
      const NamedTensors& parameters, const ChunkPlanOptions& options);

  ChunkPlan(const ChunkPlan&) = delete;
  ChunkPlan& operator=(const ChunkPlan&) = delete;

  const Partition& partition() const { return partition_; }
  uint32_t num_shards() const { return partition_.num_shards(); }

  // The registered tensors, in registration order.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  // The tensor chunk `spec` belongs to, and its registered name.
  const torch::Tensor& ParameterOf(const ChunkSpec& spec) const {
    return parameters_[spec.tensor_index];
  }
  // Where pulled weights of chunk `spec` are written: the memory the tensor
  // held at registration, through a tensor of its own that shares it. A
  // script that replaces a registered tensor's data (`p.data = ...`) while
  // pulls are still landing (pull ahead) then cannot have them written
  // into the new data, whatever its size, nor into freed memory; the
  // binding refuses the next call.
  const torch::Tensor& WeightsOf(const ChunkSpec& spec) const {
    return weights_[spec.tensor_index];
  }
  const std::string& NameOf(const ChunkSpec& spec) const {
    return partition_.tensors()[spec.tensor_index].name;
  }
  // Whether any registered tensor lives on a CUDA device.
  bool any_cuda() const;

  // Every chunk's slot, indexed by key. `key` must be < slots().size().
  std::vector<ChunkSlot>& slots() { return slots_; }
  const std::vector<ChunkSlot>& slots() const { return slots_; }
  ChunkSlot& slot(uint64_t key) { return slots_[key]; }

  // The node's local rank that handles chunk `key`, and whether it is this
  // one.
  int LocalOwnerOf(uint64_t key) const {
    return static_cast<int>(key % static_cast<uint64_t>(local_size_));
  }
  bool OwnsLocally(uint64_t key) const {
    return LocalOwnerOf(key) == local_rank_;
  }
  // The keys of parameter `index`'s chunks that this local rank handles,
  // ascending; and those of every parameter, ascending.
  const std::vector<uint64_t>& OwnedKeys(size_t index) const {
    return owned_keys_[index];
  }
  std::vector<uint64_t> AllOwnedKeys() const;

  // Marks every chunk as held at no version (kHoldsNothing) of no history
  // epoch (0), so that the next pull answers with dense weights.
  void ForgetVersions();
  // The L2 norm of the host residuals over all chunks (residuals kept on a
  // CUDA device are not read back).
  double ResidualNorm() const;
  // Host bytes held by the slots' compression state: residuals and their
  // spare buffers (FeedbackState::spare), DGC velocities, and the worker's
  // momentum velocities and Nesterov inputs (allocated capacity).
  uint64_t CompressionStateBytes() const;

 private:
  ChunkPlan(Partition partition, std::vector<torch::Tensor> parameters,
            const ChunkPlanOptions& options);

  const Partition partition_;
  const std::vector<torch::Tensor> parameters_;
  // Each parameter's detach(): the same memory, held for the plan's life.
  std::vector<torch::Tensor> weights_;
  const int local_rank_;
  const int local_size_;
  std::vector<ChunkSlot> slots_;
  std::vector<std::vector<uint64_t>> owned_keys_;  // Per parameter.
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_CHUNK_PLAN_H_
