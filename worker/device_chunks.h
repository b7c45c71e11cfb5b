// CUDA tensors in ParameterSync (internal to worker/).
//
// A chunk of a CUDA gradient is compressed on its device when gradwire was
// built with the CUDA kernels (common/cuda) and the compressor runs there
// (none, fp16, bf16, topk, threshold, randomk): the error-feedback residual
// stays on the device, the kernels read the gradient through data_ptr, and
// only the compressed payload is copied to the host. Otherwise (a build
// without the kernels, or dgc, qsgd, onebit) the chunk is copied to the host
// and the CPU compressor runs with a host residual, as for CPU tensors.
// Pulled weights are written back to the device: sparse deltas as an
// index_add_ of the sent elements, everything else through a host buffer.
//
// Only device-generic libtorch APIs are used, so this compiles against a
// CPU-only libtorch (where no CUDA tensor can exist at run time).
#ifndef GRADWIRE_WORKER_DEVICE_CHUNKS_H_
#define GRADWIRE_WORKER_DEVICE_CHUNKS_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/cuda/device_compressor.h"

namespace gradwire {

// Compresses chunks of CUDA gradients on their devices and keeps one
// residual per chunk there. Not thread-safe; libtorch exceptions propagate
// (ParameterSync catches them at its edge).
class DeviceChunkCompressor {
 public:
  // A compressor for `options`; nullptr (with OK) when chunks of CUDA
  // tensors go through the host instead (see the file comment).
  // FAILED_PRECONDITION when they would run on the device but the kernels'
  // CUDA runtime sees none.
  static absl::StatusOr<std::unique_ptr<DeviceChunkCompressor>> Create(
      const CompressorOptions& options, bool error_feedback);

  // Starts a step: the next Compress on each device first waits for
  // libtorch's current stream there, which produced the gradients.
  void BeginStep();

  // Compresses elements [offset, offset + numel) of `gradient` (a
  // contiguous float32 CUDA tensor) into *out, with error feedback through
  // the residual of chunk `key` (zero at first, allocated on the gradient's
  // device) unless feedback is off. Errors as DeviceCompressor's.
  absl::Status Compress(uint64_t key, const torch::Tensor& gradient,
                        uint64_t offset, uint64_t numel,
                        const CompressContext& ctx, CompressedChunk* out);

  // The residual of chunk `key` on its device: undefined before the
  // chunk's first push (zero then). For saving and restoring a worker's
  // state (worker_state.h).
  torch::Tensor residual(uint64_t key) const {
    return key < residuals_.size() ? residuals_[key] : torch::Tensor();
  }
  // Replaces the residual of chunk `key` with `residual` (float32, the
  // chunk's size), moved to `device`.
  void set_residual(uint64_t key, const torch::Tensor& residual,
                    const torch::Device& device);
  // Puts back a residual of chunk `key` that residual() returned (cloned)
  // before a step; undefined: the chunk's state before its first push.
  void restore_residual(uint64_t key, torch::Tensor kept);

 private:
  DeviceChunkCompressor(std::unique_ptr<DeviceCompressor> compressor,
                        bool error_feedback);
  void WaitForTorch(const torch::Device& device);

  std::unique_ptr<DeviceCompressor> compressor_;
  bool error_feedback_;
  // Indexed by chunk key; undefined until the chunk's first push.
  std::vector<torch::Tensor> residuals_;
  // Devices whose libtorch stream was waited for in this step.
  std::vector<bool> waited_;
};

// The elements [offset, offset + numel) of a contiguous tensor, as a flat
// view of its storage.
torch::Tensor ChunkView(const torch::Tensor& tensor, uint64_t offset,
                        uint64_t numel);

// Writes a pulled chunk into elements [offset, offset + numel) of
// `tensor`, a contiguous float32 CUDA tensor: adds it when `delta`,
// overwrites them otherwise. Synchronous.
void WriteChunkToDevice(const CompressedChunk& chunk, bool delta,
                        const torch::Tensor& tensor, uint64_t offset);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_DEVICE_CHUNKS_H_
