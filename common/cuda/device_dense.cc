// The dense compressors on the device (none, fp16, bf16): every element,
// rounded to the wire precision, with 16-bit patterns copied to the host.
#include <cuda_runtime_api.h>

#include "common/cuda/device_compressor_internal.h"
#include "common/cuda/kernels.h"
#include "common/precision.h"

namespace gradwire {

using cuda_internal::CopyAsync;
using cuda_internal::DevicePrecision;
using cuda_internal::Precision;
using cuda_internal::Reserve;
using cuda_internal::Workspace;

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

}  // namespace gradwire
