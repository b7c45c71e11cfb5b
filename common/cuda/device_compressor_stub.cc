// device_compressor.h in a build without the CUDA kernels: nothing runs on
// the device, and callers take their host path.
#include "common/cuda/device_compressor.h"

namespace gradwire {

struct DeviceCompressor::State {
  CompressorOptions options;
};

namespace {

absl::Status NotBuilt() {
  return absl::UnimplementedError(
      "gradwire was built without the CUDA kernels (GRADWIRE_CUDA=OFF or no "
      "CUDA toolkit found)");
}

}  // namespace

bool CudaKernelsBuilt() { return false; }

int CudaDeviceCount() { return 0; }

bool DeviceCompressor::RunsOnDevice(absl::string_view name) { return false; }

absl::StatusOr<std::unique_ptr<DeviceCompressor>> DeviceCompressor::Create(
    const CompressorOptions& options) {
  return NotBuilt();
}

DeviceCompressor::DeviceCompressor(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

DeviceCompressor::~DeviceCompressor() = default;

const CompressorOptions& DeviceCompressor::options() const {
  return state_->options;
}

absl::Status DeviceCompressor::CompressWithFeedback(
    const float* gradient, float* residual, uint64_t numel,
    const CompressContext& ctx, DeviceLocation where, CompressedChunk* out) {
  return NotBuilt();
}

absl::Status DeviceCompressor::Compress(const float* input, uint64_t numel,
                                        const CompressContext& ctx,
                                        DeviceLocation where,
                                        CompressedChunk* out) {
  return NotBuilt();
}

}  // namespace gradwire
