// The CUDA runtime as the device compressor uses it: errors as statuses,
// the current device, device memory and copies.
#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "common/cuda/device_compressor_internal.h"

namespace gradwire {
namespace cuda_internal {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  switch (error) {
    case cudaSuccess:
      return absl::OkStatus();
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(absl::StrFormat(
          "no CUDA device: %s (%s)", cudaGetErrorString(error), what));
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s", what, cudaGetErrorString(error)));
    default:
      return absl::InternalError(absl::StrFormat("CUDA %s: %s: %s", what,
                                                 cudaGetErrorName(error),
                                                 cudaGetErrorString(error)));
  }
}

absl::Status DeviceScope::Enter(int device) {
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous_));
  if (previous_ == device) return absl::OkStatus();
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  switched_ = true;
  return absl::OkStatus();
}

Workspace::~Workspace() {
  DeviceScope scope;
  if (!scope.Enter(device).ok()) return;
  for (void* p :
       {static_cast<void*>(control), static_cast<void*>(histogram),
        static_cast<void*>(tile_counts), static_cast<void*>(indices), values}) {
    if (p != nullptr) cudaFree(p);
  }
}

absl::Status CheckDevicePointer(const void* p, int device, const char* what) {
  cudaPointerAttributes attributes;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, p));
  if (attributes.type != cudaMemoryTypeDevice &&
      attributes.type != cudaMemoryTypeManaged) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not CUDA device memory", what));
  }
  if (attributes.device != device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is on CUDA device %d, not %d", what, attributes.device, device));
  }
  return absl::OkStatus();
}

absl::Status CopyAsync(void* to, const void* from, size_t bytes,
                       cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, kind, stream));
  return absl::OkStatus();
}

}  // namespace cuda_internal
}  // namespace gradwire
