#include "common/cuda/device_compressor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/compress/random_index_set.h"
#include "common/compress/registry.h"
#include "common/cuda/kernels.h"
#include "common/precision.h"

namespace gradwire {

using cuda_internal::Control;
using cuda_internal::Precision;
using cuda_internal::Rule;

namespace {

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

#define GRADWIRE_CUDA_RETURN_IF_ERROR(call)                              \
  do {                                                                   \
    if (absl::Status status_ = CudaStatus((call), #call); !status_.ok()) \
      return status_;                                                    \
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

  absl::Status Enter(int device) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous_));
    if (previous_ == device) return absl::OkStatus();
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    switched_ = true;
    return absl::OkStatus();
  }

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

  ~Workspace() {
    DeviceScope scope;
    if (!scope.Enter(device).ok()) return;
    for (void* p : {static_cast<void*>(control), static_cast<void*>(histogram),
                    static_cast<void*>(tile_counts),
                    static_cast<void*>(indices), values}) {
      if (p != nullptr) cudaFree(p);
    }
  }
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

// cudaMemcpyAsync, skipping empty copies (whose pointers may be null).
absl::Status CopyAsync(void* to, const void* from, size_t bytes,
                       cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, kind, stream));
  return absl::OkStatus();
}

Precision DevicePrecision(ValuePrecision p) {
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

// What Compressor::TargetCount gives sparsifiers outside DGC's warm-up:
// options.k clamped to numel, else round(ratio * numel) in [1, numel].
uint64_t KeptCount(const CompressorOptions& options, uint64_t numel) {
  if (options.k.has_value()) return std::min(*options.k, numel);
  if (numel == 0) return 0;
  const auto k = static_cast<uint64_t>(std::llround(options.ratio * numel));
  return std::clamp<uint64_t>(k, 1, numel);
}

bool IsDense(absl::string_view name) {
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

}  // namespace

struct DeviceCompressor::State {
  CompressorOptions options;
  // By device ordinal; null until the device is first used.
  std::vector<std::unique_ptr<Workspace>> workspaces;
  // Host copy of dense 16-bit patterns.
  std::vector<uint16_t> bits;

  bool zero_non_finite() const {
    return options.non_finite == NonFinitePolicy::kZero;
  }
  absl::StatusOr<Workspace*> WorkspaceFor(int device);
  absl::Status Start(const float* input, float* residual, uint64_t numel,
                     const CompressContext& ctx, DeviceLocation where,
                     CompressedChunk* out);
  absl::Status Run(DeviceCall call, const CompressContext& ctx);
  absl::Status RunDense(const DeviceCall& call);
  absl::Status RunSparse(const DeviceCall& call, Rule rule, uint64_t known);
  absl::Status RunRandomK(const DeviceCall& call, const CompressContext& ctx);
  absl::Status Finish(const DeviceCall& call, Control* control);
};

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

absl::Status DeviceCompressor::State::RunDense(const DeviceCall& call) {
  Workspace& ws = *call.workspace;
  const uint64_t n = call.numel;
  const Precision precision = DevicePrecision(options.precision);
  const size_t width = precision == Precision::kFp32 ? 4 : 2;
  if (absl::Status s = Reserve(&ws.values, &ws.value_bytes, n * width);
      !s.ok()) {
    return s;
  }
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchDense(
      call.input, call.residual, n, zero_non_finite(), precision, ws.control,
      ws.values, call.stream));
  CompressedChunk& out = *call.out;
  out.encoding = Encoding::kDense;
  out.values.resize(n);
  void* host = out.values.data();
  if (width == 2) {
    bits.resize(n);
    host = bits.data();
  }
  if (absl::Status s = CopyAsync(host, ws.values, n * width,
                                 cudaMemcpyDeviceToHost, call.stream);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Finish(call, nullptr); !s.ok()) return s;
  if (precision == Precision::kFp16) {
    for (uint64_t i = 0; i < n; ++i) out.values[i] = HalfBitsToFloat(bits[i]);
  } else if (precision == Precision::kBf16) {
    for (uint64_t i = 0; i < n; ++i) out.values[i] = Bf16BitsToFloat(bits[i]);
  }
  return absl::OkStatus();
}

absl::Status DeviceCompressor::State::RunSparse(const DeviceCall& call,
                                                Rule rule, uint64_t known) {
  Workspace& ws = *call.workspace;
  const uint64_t n = call.numel;
  const bool sanitize = !call.feedback() && zero_non_finite();
  const unsigned int tiles = cuda_internal::TileCount(n);
  if (absl::Status s = Reserve(&ws.tile_counts, &ws.tile_bytes,
                               (tiles + 1) * sizeof(unsigned long long));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Reserve(&ws.indices, &ws.index_bytes, n * 4); !s.ok()) {
    return s;
  }
  if (absl::Status s = Reserve(&ws.values, &ws.value_bytes, n * 4); !s.ok()) {
    return s;
  }
  float* values = static_cast<float*>(ws.values);
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchCountSelected(
      call.selected_from(), n, sanitize, rule, options.threshold, ws.control,
      ws.tile_counts, call.stream));
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchScatterSelected(
      call.selected_from(), call.residual, n, sanitize, rule, options.threshold,
      DevicePrecision(options.precision), ws.control, ws.tile_counts,
      ws.indices, values, call.stream));
  CompressedChunk& out = *call.out;
  Control control;
  uint64_t count = known;
  if (known == std::numeric_limits<uint64_t>::max()) {
    // The threshold's count is known only on the device: fetch it first.
    if (absl::Status s = Finish(call, &control); !s.ok()) return s;
    count = control.selected;
  }
  out.indices.resize(count);
  out.values.resize(count);
  if (absl::Status s = CopyAsync(out.indices.data(), ws.indices, count * 4,
                                 cudaMemcpyDeviceToHost, call.stream);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CopyAsync(out.values.data(), values, count * 4,
                                 cudaMemcpyDeviceToHost, call.stream);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Finish(call, &control); !s.ok()) return s;
  if (control.selected != count) {
    return absl::InternalError(
        absl::StrFormat("%s on the device selected %d elements, not %d",
                        options.name, control.selected, count));
  }
  return absl::OkStatus();
}

absl::Status DeviceCompressor::State::RunRandomK(const DeviceCall& call,
                                                 const CompressContext& ctx) {
  Workspace& ws = *call.workspace;
  const uint64_t n = call.numel;
  CompressedChunk& out = *call.out;
  out.encoding = Encoding::kRandomK;
  out.seed = MixSeed(options.seed, ctx.chunk_key, ctx.step);
  out.indices = RandomIndexSet(out.seed, n, KeptCount(options, n));
  const uint64_t k = out.indices.size();
  if (absl::Status s = Reserve(&ws.indices, &ws.index_bytes, k * 4); !s.ok()) {
    return s;
  }
  if (absl::Status s = Reserve(&ws.values, &ws.value_bytes, k * 4); !s.ok()) {
    return s;
  }
  float* values = static_cast<float*>(ws.values);
  if (absl::Status s = CopyAsync(ws.indices, out.indices.data(), k * 4,
                                 cudaMemcpyHostToDevice, call.stream);
      !s.ok()) {
    return s;
  }
  GRADWIRE_CUDA_RETURN_IF_ERROR(cuda_internal::LaunchGather(
      call.selected_from(), call.residual,
      !call.feedback() && zero_non_finite(), ws.indices, k,
      DevicePrecision(options.precision), ws.control, values, call.stream));
  out.values.resize(k);
  if (absl::Status s = CopyAsync(out.values.data(), values, k * 4,
                                 cudaMemcpyDeviceToHost, call.stream);
      !s.ok()) {
    return s;
  }
  return Finish(call, nullptr);
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
