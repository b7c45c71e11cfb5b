// The sparse compressors on the device: topk and threshold select on the
// device; randomk draws its positions on the host (RandomIndexSet, part of
// the wire format) and gathers their values on the device.
#include <cuda_runtime_api.h>

#include <limits>

#include "absl/strings/str_format.h"
#include "common/compress/random_index_set.h"
#include "common/cuda/device_compressor_internal.h"
#include "common/cuda/kernels.h"

namespace gradwire {

using cuda_internal::Control;
using cuda_internal::CopyAsync;
using cuda_internal::DevicePrecision;
using cuda_internal::Reserve;
using cuda_internal::Rule;
using cuda_internal::Workspace;

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

}  // namespace gradwire
