#include "worker/device_chunks.h"

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <utility>

namespace gradwire {

absl::StatusOr<std::unique_ptr<DeviceChunkCompressor>>
DeviceChunkCompressor::Create(const CompressorOptions& options,
                              bool error_feedback) {
  if (!DeviceCompressor::RunsOnDevice(options.name)) {
    return std::unique_ptr<DeviceChunkCompressor>();
  }
  if (CudaDeviceCount() == 0) {
    // libtorch has CUDA tensors, but the runtime the kernels were built
    // with sees no device (typically a driver older than the toolkit).
    return absl::FailedPreconditionError(
        "CUDA parameters, but gradwire's CUDA kernels see no device (is the "
        "driver older than the CUDA toolkit gradwire was built with?); build "
        "with -DGRADWIRE_CUDA=OFF to compress CUDA tensors through the host");
  }
  auto compressor = DeviceCompressor::Create(options);
  if (!compressor.ok()) return compressor.status();
  return std::unique_ptr<DeviceChunkCompressor>(
      new DeviceChunkCompressor(std::move(*compressor), error_feedback));
}

DeviceChunkCompressor::DeviceChunkCompressor(
    std::unique_ptr<DeviceCompressor> compressor, bool error_feedback)
    : compressor_(std::move(compressor)), error_feedback_(error_feedback) {}

void DeviceChunkCompressor::set_residual(uint64_t key,
                                         const torch::Tensor& residual,
                                         const torch::Device& device) {
  if (residuals_.size() <= key) residuals_.resize(key + 1);
  residuals_[key] = residual.to(device, torch::kFloat32).contiguous().clone();
}

void DeviceChunkCompressor::restore_residual(uint64_t key, torch::Tensor kept) {
  if (residuals_.size() <= key) residuals_.resize(key + 1);
  residuals_[key] = std::move(kept);
}

void DeviceChunkCompressor::BeginStep() {
  waited_.assign(waited_.size(), false);
}

// The kernels run on the legacy default stream; libtorch may have queued
// the backward pass (or the residual's zero fill) on a stream of its own,
// and the stream handle is not reachable through device-generic APIs, so
// the host waits for that stream once per step and device.
void DeviceChunkCompressor::WaitForTorch(const torch::Device& device) {
  const auto index = static_cast<size_t>(device.index());
  if (waited_.size() <= index) waited_.resize(index + 1, false);
  if (waited_[index]) return;
  c10::impl::getDeviceGuardImpl(device.type())->getStream(device).synchronize();
  waited_[index] = true;
}

absl::Status DeviceChunkCompressor::Compress(uint64_t key,
                                             const torch::Tensor& gradient,
                                             uint64_t offset, uint64_t numel,
                                             const CompressContext& ctx,
                                             CompressedChunk* out) {
  const torch::Device device = gradient.device();
  DeviceLocation where;
  where.device = device.index();
  const float* g = gradient.data_ptr<float>() + offset;
  if (!error_feedback_) {
    WaitForTorch(device);
    return compressor_->Compress(g, numel, ctx, where, out);
  }
  if (residuals_.size() <= key) residuals_.resize(key + 1);
  torch::Tensor& residual = residuals_[key];
  if (!residual.defined() || residual.device() != device) {
    residual =
        torch::zeros({static_cast<int64_t>(numel)},
                     torch::TensorOptions(torch::kFloat32).device(device));
    // The fill was queued on libtorch's stream: wait for it too.
    if (static_cast<size_t>(device.index()) < waited_.size()) {
      waited_[device.index()] = false;
    }
  }
  WaitForTorch(device);
  return compressor_->CompressWithFeedback(g, residual.data_ptr<float>(), numel,
                                           ctx, where, out);
}

torch::Tensor ChunkView(const torch::Tensor& tensor, uint64_t offset,
                        uint64_t numel) {
  return tensor.view({-1}).narrow(0, static_cast<int64_t>(offset),
                                  static_cast<int64_t>(numel));
}

void WriteChunkToDevice(const CompressedChunk& chunk, bool delta,
                        const torch::Tensor& tensor, uint64_t offset) {
  torch::Tensor target = ChunkView(tensor, offset, chunk.numel);
  const bool sparse = chunk.encoding == Encoding::kSparse ||
                      chunk.encoding == Encoding::kRandomK;
  if (delta && sparse) {
    const auto nnz = static_cast<int64_t>(chunk.values.size());
    if (nnz == 0) return;
    std::vector<int64_t> indices(chunk.indices.begin(), chunk.indices.end());
    // Blocking copies: the host vectors may go once they return.
    torch::Tensor device_indices =
        torch::from_blob(indices.data(), {nnz}, torch::kInt64)
            .to(tensor.device());
    torch::Tensor device_values =
        torch::from_blob(const_cast<float*>(chunk.values.data()), {nnz},
                         torch::kFloat32)
            .to(tensor.device());
    // One addition per index (they are distinct): the same float sums as
    // AccumulateInto on a CPU replica.
    target.index_add_(0, device_indices, device_values);
    return;
  }
  torch::Tensor host =
      torch::empty({static_cast<int64_t>(chunk.numel)}, torch::kFloat32);
  DecompressInto(chunk, absl::MakeSpan(host.data_ptr<float>(), chunk.numel));
  if (delta) {
    target.add_(host.to(tensor.device()));
  } else {
    target.copy_(host);
  }
}

}  // namespace gradwire
