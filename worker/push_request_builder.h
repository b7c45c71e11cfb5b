// One step's push requests: each chunk's gradient compressed with error
// feedback (one residual per chunk) and encoded into the request of the
// shard that owns it.
//
// With momentum on the worker (SyncOptions::worker_momentum), the velocity
// of each chunk is what gets compressed, and it is masked where a sparse
// push sent (common/compress/momentum_correction.h). During the
// worker_momentum's dense_steps (which apply with or without momentum), the
// push is the uncompressed fp32 gradient instead, and the residual is left
// alone (1-bit Adam's warm-up, Python's exchange="preconditioned").
//
// CPU gradients are compressed in place (the compressor reads the
// gradient's memory), the chunks of one Build in parallel on a ThreadPool
// (each chunk has its own residual, velocity and scratch, so the bytes are
// those of a serial run). CUDA gradients are compressed on their device, with
// the residual kept there, when gradwire was built with the CUDA kernels
// and the compressor runs there (device_chunks.h); otherwise they are
// copied to the host and compressed like CPU ones.
//
// With compressor "auto" (auto_compression.h), each chunk is compressed by
// the rung its layer group holds this step, all rungs sharing the chunk's
// residual, and the gradient's and residual's norms are noted for the
// next choice; CUDA gradients then go through the host.
//
// Thread safety: not thread-safe; ParameterSync calls it from the training
// thread, or from its push pipeline's thread while that one owns the
// chunks.
#ifndef GRADWIRE_WORKER_PUSH_REQUEST_BUILDER_H_
#define GRADWIRE_WORKER_PUSH_REQUEST_BUILDER_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compress/compressor.h"
#include "common/compress/momentum_correction.h"
#include "common/threads/thread_pool.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/auto_compression.h"
#include "worker/chunk_plan.h"
#include "worker/cpu_account.h"
#include "worker/device_chunks.h"

namespace gradwire {

class PushRequestBuilder {
 public:
  // A builder for `options` (MakeCompressor), with error feedback unless
  // `error_feedback` is false, for the pushes of `worker_id`. With
  // `momentum` enabled, each chunk's gradient first goes through its
  // velocity (momentum_correction.h) and the velocity is compressed.
  // Compresses on `compress_threads` threads (0: UsableCpus()).
  // INVALID_ARGUMENT for a compressor that does not exist or takes bad
  // options, for dgc without error feedback, and for dgc's own momentum
  // together with `momentum` (one velocity only).
  static absl::StatusOr<std::unique_ptr<PushRequestBuilder>> Create(
      const CompressorOptions& options, bool error_feedback,
      const MomentumCorrectionOptions& momentum, uint32_t worker_id,
      int compress_threads = 1);

  // Threads the chunks are compressed on.
  // The building thread is one of them (ParallelFor).
  int compress_threads() const { return pool_.threads() + 1; }

  // Once the parameters are known: when some live on a CUDA device,
  // prepares to compress their chunks there (DeviceChunkCompressor::Create;
  // its errors). With compressor "auto", makes its chooser over the
  // tensors whose chunks this local rank pushes, as `setup` says
  // (AutoCompression::Create's errors).
  absl::Status PrepareFor(const ChunkPlan& plan,
                          const AutoCompressionSetup& setup = {});

  // Where the CPU of compression, momentum and encoding is counted (null:
  // nowhere). `account` must outlive this builder's Builds.
  void set_cpu_account(CpuAccount* account) { cpu_account_ = account; }

  // Compressor "auto"'s state; null for any other compressor (or before
  // PrepareFor).
  AutoCompression* auto_compression() const { return auto_.get(); }

  // The compressor of CUDA chunks on their device, which keeps their
  // residuals; null when there is none (PrepareFor).
  DeviceChunkCompressor* device_compressor() const {
    return device_compressor_.get();
  }

  // Starts step `step`: device compression first waits for the stream that
  // produced the gradients, and compressor "auto" chooses the step's rungs
  // (at `learning_rate`, 0: unknown). Call before the step's first Build.
  void BeginStep(uint64_t step = 0, double learning_rate = 0);

  // Requests of step `step` (one per shard, index = shard id; a shard
  // without chunks gets an empty request) with the gradients of chunks
  // `keys` of `plan`, read from their parameters' grad(), which must be
  // defined. `epoch` feeds warm-up schedules. Updates the chunks' residuals,
  // velocities and scratch buffers once per step: a chunk whose scratch
  // holds `step`'s message already (ChunkSlot::scratch_step; a retry) is
  // encoded from it again, unchanged, and its gradient is not read. Errors:
  // the compressor's or the codec's, the former prefixed with the chunk
  // ("chunk 3 (fc1.weight): ..."); INTERNAL for a libtorch failure. When a
  // chunk fails, the chunks compressed in parallel with it keep their
  // messages for the retry, which compresses only the chunks without one.
  // With `carried` (one flag per registered tensor; empty: all), a chunk of
  // a tensor not flagged pushes an empty message: its gradient is not read
  // and its residual and velocity do not move.
  absl::Status Build(const std::vector<uint64_t>& keys, uint64_t step,
                     int epoch, ChunkPlan* plan,
                     std::vector<v1::PushRequest>* requests,
                     const std::vector<bool>& carried = {});

  // With `on`, each Build copies a chunk's error-feedback residual before
  // compressing it (ChunkSlot::kept_residual: 4 bytes per element, on the
  // chunk's device), so that RestoreResiduals can undo the step. Off, the
  // copies are freed as their chunks are next compressed, and only a
  // residual that is still empty is "copied" (for nothing). Call between
  // steps: Builds read it.
  void set_keep_residuals(bool on) { keep_residuals_ = on; }

  // Puts back the residuals of the chunks of `plan` that this builder
  // compressed at `step` as they were before it. Returns how many of
  // those chunks it could not restore: compressed without a copy (keeping
  // was off and their residual not empty). Chunks pushed uncompressed or
  // without error feedback have nothing to restore.
  int RestoreResiduals(uint64_t step, ChunkPlan* plan);

 private:
  PushRequestBuilder(CompressorOptions options,
                     std::unique_ptr<const Compressor> compressor,
                     std::unique_ptr<const Compressor> warmup_compressor,
                     bool error_feedback, MomentumCorrectionOptions momentum,
                     uint32_t worker_id, int compress_threads);

  // Compresses the gradient of chunk `key` and encodes it into *encoded;
  // errors are prefixed with the chunk.
  absl::Status CompressAndEncode(uint64_t key, CompressContext context,
                                 ChunkPlan* plan, v1::ChunkData* encoded);

  // An empty message for chunk `spec` (Build's `carried`): no element.
  absl::Status EncodeNothing(const ChunkSpec& spec,
                             v1::ChunkData* encoded) const;

  // Compresses one chunk's gradient into slot->scratch: on the device, or
  // through the CPU compressor. Throws as libtorch does.
  absl::Status CompressChunk(const torch::Tensor& gradient,
                             const CompressContext& context, ChunkSlot* slot);
  // Whether a host chunk's momentum step runs inside its compression
  // (Compressor::CompressVelocityWithFeedback): momentum without Nesterov,
  // with error feedback, past the dense warm-up.
  bool FusesMomentum(const CompressContext& context) const;
  // That path for one chunk's host gradient, masking included.
  absl::Status CompressVelocity(absl::Span<const float> gradient,
                                const CompressContext& context,
                                ChunkSlot* slot);
  // Copies the chunk's residual into its slot before compression at
  // `step`, as set_keep_residuals says.
  void KeepResidual(uint64_t step, const torch::Tensor& gradient,
                    ChunkSlot* slot) const;
  // The compressor of a host chunk: its rung's under "auto".
  const Compressor& HostCompressor(const ChunkSlot& slot) const;
  // Under "auto": notes the norms of what `slot` compressed (`values`) and
  // of the residual it left.
  void NoteNorms(const ChunkSlot& slot, absl::Span<const float> values);

  // Constant after construction.
  const CompressorOptions options_;
  const std::unique_ptr<const Compressor> compressor_;
  // Every nonzero element at fp32, for chunks registered uncompressed.
  const std::unique_ptr<const Compressor> uncompressed_;
  // Dense fp32 for the momentum's dense_steps; null when there are none.
  const std::unique_ptr<const Compressor> warmup_compressor_;
  const bool error_feedback_;
  const MomentumCorrectionOptions momentum_;
  const uint32_t worker_id_;
  // CUDA gradients compressed on the device; null when there are no CUDA
  // parameters or they go through the host.
  std::unique_ptr<DeviceChunkCompressor> device_compressor_;
  // Compressor "auto"'s chooser and rungs (PrepareFor); null otherwise.
  std::unique_ptr<AutoCompression> auto_;
  // Set before the first Build; never owned.
  CpuAccount* cpu_account_ = nullptr;
  // Changed between steps only (set_keep_residuals).
  bool keep_residuals_ = false;
  ThreadPool pool_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_PUSH_REQUEST_BUILDER_H_
