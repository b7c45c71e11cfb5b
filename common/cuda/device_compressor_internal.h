// The host side of DeviceCompressor (device_compressor.h), shared by the
// files that implement it. Private to common/cuda: nothing outside this
// folder may include it. Built only with the CUDA kernels.
//
//   device_runtime.cc     CUDA errors as statuses, the current device,
//                         device memory and copies
//   device_compressor.cc  the public entry points; checks a call, prepares
//                         its workspace, launches the common stages and
//                         hands over to the compressor family
//   device_dense.cc       none, fp16, bf16: the rounded dense values
//   device_sparse.cc      topk, threshold (selection on the device) and
//                         randomk (positions drawn on the host)
#ifndef GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_INTERNAL_H_
#define GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/cuda/device_compressor.h"
#include "common/cuda/kernels.h"

namespace gradwire {
namespace cuda_internal {

// OK for cudaSuccess; FAILED_PRECONDITION "no CUDA device: ..." without a
// driver or device, INVALID_ARGUMENT for an invalid device, else INTERNAL.
// `what` names the call.
absl::Status CudaStatus(cudaError_t error, const char* what);

#define GRADWIRE_CUDA_RETURN_IF_ERROR(call)                       \
  do {                                                            \
    if (absl::Status status_ =                                    \
            ::gradwire::cuda_internal::CudaStatus((call), #call); \
        !status_.ok())                                            \
      return status_;                                             \
  } while (false)

// Makes `device` the calling thread's current device for its lifetime and
// restores the previous one.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }

  absl::Status Enter(int device);

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// Device memory of one device, grown on demand and reused across calls.
struct Workspace {
  int device = 0;
  Control* control = nullptr;
  unsigned int* histogram = nullptr;
  unsigned long long* tile_counts = nullptr;
  size_t tile_bytes = 0;
  uint32_t* indices = nullptr;
  size_t index_bytes = 0;
  void* values = nullptr;
  size_t value_bytes = 0;

  ~Workspace();
};

// Makes *buffer hold at least `bytes`. Its contents are not kept.
template <typename T>
absl::Status Reserve(T** buffer, size_t* capacity, size_t bytes) {
  if (bytes <= *capacity) return absl::OkStatus();
  if (*buffer != nullptr) cudaFree(*buffer);
  *buffer = nullptr;
  *capacity = 0;
  void* fresh = nullptr;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMalloc(&fresh, bytes));
  *buffer = static_cast<T*>(fresh);
  *capacity = bytes;
  return absl::OkStatus();
}

// INVALID_ARGUMENT unless `p` is memory of `device`.
absl::Status CheckDevicePointer(const void* p, int device, const char* what);

// cudaMemcpyAsync, skipping empty copies (whose pointers may be null).
absl::Status CopyAsync(void* to, const void* from, size_t bytes,
                       cudaMemcpyKind kind, cudaStream_t stream);

inline Precision DevicePrecision(ValuePrecision p) {
  switch (p) {
    case ValuePrecision::kFp16:
      return Precision::kFp16;
    case ValuePrecision::kBf16:
      return Precision::kBf16;
    case ValuePrecision::kFp32:
      break;
  }
  return Precision::kFp32;
}

inline bool IsDense(absl::string_view name) {
  return name == "none" || name == "fp16" || name == "bf16";
}

// One call's inputs, resolved.
struct DeviceCall {
  const float* input;  // The gradient (feedback) or the input.
  float* residual;     // Null without error feedback.
  uint64_t numel;
  cudaStream_t stream;
  Workspace* workspace;
  CompressedChunk* out;

  bool feedback() const { return residual != nullptr; }
  // The buffer the selection reads: the accumulated residual, or the input.
  const float* selected_from() const { return feedback() ? residual : input; }
};

}  // namespace cuda_internal

struct DeviceCompressor::State {
  using Control = cuda_internal::Control;
  using DeviceCall = cuda_internal::DeviceCall;
  using Rule = cuda_internal::Rule;
  using Workspace = cuda_internal::Workspace;

  CompressorOptions options;
  // By device ordinal; null until the device is first used.
  std::vector<std::unique_ptr<Workspace>> workspaces;
  // Host copy of dense 16-bit patterns.
  std::vector<uint16_t> bits;

  bool zero_non_finite() const {
    return options.non_finite == NonFinitePolicy::kZero;
  }
  // device_compressor.cc
  absl::StatusOr<Workspace*> WorkspaceFor(int device);
  absl::Status Start(const float* input, float* residual, uint64_t numel,
                     const CompressContext& ctx, DeviceLocation where,
                     CompressedChunk* out);
  absl::Status Run(DeviceCall call, const CompressContext& ctx);
  absl::Status Finish(const DeviceCall& call, Control* control);
  // device_dense.cc
  absl::Status RunDense(const DeviceCall& call);
  // device_sparse.cc
  absl::Status RunSparse(const DeviceCall& call, Rule rule, uint64_t known);
  absl::Status RunRandomK(const DeviceCall& call, const CompressContext& ctx);
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_INTERNAL_H_
