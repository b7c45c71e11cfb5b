// DeviceCompressor's entry points and the stages every call shares: the
// checks, the workspace, the launches before the family's own, and the wait
// at the end.
#include "common/cuda/device_compressor.h"

#include <cuda_runtime_api.h>

#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/compress/registry.h"
#include "common/cuda/device_compressor_internal.h"
#include "common/cuda/kernels.h"

namespace gradwire {

using cuda_internal::CheckDevicePointer;
using cuda_internal::Control;
using cuda_internal::DeviceCall;
using cuda_internal::DeviceScope;
using cuda_internal::IsDense;
using cuda_internal::Reserve;
using cuda_internal::Rule;
using cuda_internal::Workspace;

absl::StatusOr<Workspace*> DeviceCompressor::State::WorkspaceFor(int device) {
  if (device < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CUDA device %d does not exist", device));
  }
  if (workspaces.size() <= static_cast<size_t>(device)) {
    workspaces.resize(device + 1);
  }
  std::unique_ptr<Workspace>& workspace = workspaces[device];
  if (workspace == nullptr) {
    auto fresh = std::make_unique<Workspace>();
    fresh->device = device;
    size_t control_bytes = 0, histogram_bytes = 0;
    if (absl::Status s =
            Reserve(&fresh->control, &control_bytes, sizeof(Control));
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            Reserve(&fresh->histogram, &histogram_bytes,
                    cuda_internal::kHistogramBins * sizeof(unsigned int));
        !s.ok()) {
      return s;
    }
    workspace = std::move(fresh);
  }
  return workspace.get();
}

absl::Status DeviceCompressor::State::Start(const float* input, float* residual,
                                            uint64_t numel,
                                            const CompressContext& ctx,
                                            DeviceLocation where,
                                            CompressedChunk* out) {
  if (numel > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a chunk of %d elements; the device takes fewer than 2^32",
        options.name, numel));
  }
  if (residual != nullptr && residual < input + numel &&
      input < residual + numel) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the residual overlaps the gradient", options.name));
  }
  DeviceScope scope;
  if (absl::Status s = scope.Enter(where.device); !s.ok()) return s;
  if (numel > 0) {
    if (absl::Status s = CheckDevicePointer(
            input, where.device,
            residual != nullptr ? "the gradient" : "the input");
        !s.ok()) {
      return s;
    }
    if (residual != nullptr) {
      if (absl::Status s =
              CheckDevicePointer(residual, where.device, "the residual");
          !s.ok()) {
        return s;
      }
    }
  }
  absl::StatusOr<Workspace*> workspace = WorkspaceFor(where.device);
  if (!workspace.ok()) return workspace.status();
  DeviceCall call{input,      residual,
                  numel,      static_cast<cudaStream_t>(where.stream),
                  *workspace, out};
  return Run(call, ctx);
}

absl::Status DeviceCompressor::State::Run(DeviceCall call,
                                          const CompressContext& ctx) {
  Workspace& ws = *call.workspace;
  const absl::string_view name = options.name;
  const uint64_t n = call.numel;
  call.out->Clear();
  call.out->numel = n;
  call.out->precision = options.precision;
  const bool topk = name == "topk";
  const uint64_t k = topk ? KeptCount(options, n) : 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchInit(
      ws.control, ws.histogram, static_cast<unsigned int>(k), call.stream));
  if (!zero_non_finite()) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchFindNonFinite(
        call.input, n, ws.control, call.stream));
  }
  if (IsDense(name)) return RunDense(call);
  if (call.feedback()) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchAccumulate(
        call.input, call.residual, n, zero_non_finite(), ws.control,
        call.stream));
  }
  if (name == "randomk") return RunRandomK(call, ctx);
  call.out->encoding = Encoding::kSparse;
  if (!topk) {
    return RunSparse(call, Rule::kAtLeast,
                     std::numeric_limits<uint64_t>::max());
  }
  if (k == 0) return Finish(call, nullptr);  // All stays in the residual.
  if (k >= n) return RunSparse(call, Rule::kAll, n);
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchRadixSelect(
      call.selected_from(), n, !call.feedback() && zero_non_finite(),
      ws.control, ws.histogram, call.stream));
  return RunSparse(call, Rule::kTopK, k);
}

// Waits for the call's work, and turns a non-finite input found on the
// device into the CPU compressors' error. Copies the control block into
// *control when given.
absl::Status DeviceCompressor::State::Finish(const DeviceCall& call,
                                             Control* control) {
  Control local;
  if (control == nullptr) control = &local;
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(control, call.workspace->control, sizeof(Control),
                      cudaMemcpyDeviceToHost, call.stream));
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(call.stream));
  const uint64_t bad = control->first_non_finite;
  if (bad == cuda_internal::kAllFinite) return absl::OkStatus();
  float value = 0.0f;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemcpy(
      &value, call.input + bad, sizeof value, cudaMemcpyDeviceToHost));
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: non-finite gradient value %f at element %d of %d",
                      options.name, value, bad, call.numel));
}

bool CudaKernelsBuilt() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Clear the error for later calls.
    return 0;
  }
  return count;
}

bool DeviceCompressor::RunsOnDevice(absl::string_view name) {
  return IsDense(name) || name == "topk" || name == "threshold" ||
         name == "randomk";
}

absl::StatusOr<std::unique_ptr<DeviceCompressor>> DeviceCompressor::Create(
    const CompressorOptions& options) {
  auto validated = MakeCompressor(options);
  if (!validated.ok()) return validated.status();
  if (!RunsOnDevice(options.name)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compressor %s does not run on the device; compress on the host",
        options.name));
  }
  auto state = std::make_unique<State>();
  state->options = (*validated)->options();
  return std::unique_ptr<DeviceCompressor>(
      new DeviceCompressor(std::move(state)));
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
  return state_->Start(gradient, residual, numel, ctx, where, out);
}

absl::Status DeviceCompressor::Compress(const float* input, uint64_t numel,
                                        const CompressContext& ctx,
                                        DeviceLocation where,
                                        CompressedChunk* out) {
  return state_->Start(input, nullptr, numel, ctx, where, out);
}

}  // namespace gradwire
