// Compression of gradients that live in CUDA device memory.
//
// The CUDA counterpart of Compressor (common/compress/compressor.h) for the
// worker's CUDA tensors: the gradient and the error-feedback residual stay
// on the device, the selection and rounding run there, and only the
// compressed payload (indices and values, or the rounded dense values)
// crosses to the host, into an ordinary CompressedChunk that the codec
// encodes as usual. This header includes no CUDA header: callers compile
// with the host compiler and pass device pointers and a stream as opaque
// values.
//
// What runs on the device, with the same result as the CPU compressor of the
// same options (bit for bit; tests/common/cuda/device_compressor_test.cc
// compares them):
//   none, fp16, bf16  dense rounding to the wire precision (fp16 saturates
//                     at +-65504 like the CPU path), 16-bit patterns copied
//   topk              exact k, larger magnitude first and ties to the lower
//                     index, like select.cc
//   threshold         |x| >= threshold
//   randomk           positions drawn on the host (RandomIndexSet, part of
//                     the wire format), values gathered on the device
// The others (dgc, qsgd, onebit) do not run here: RunsOnDevice() is false,
// and the caller copies the gradient to the host and uses the CPU
// compressor (the worker does).
//
// A build without the CUDA kernels (GRADWIRE_CUDA=OFF or no toolkit) has
// the same header; CudaKernelsBuilt() is false and Create returns
// UNIMPLEMENTED.
#ifndef GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_H_
#define GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"

namespace gradwire {

// Whether this build has the CUDA kernels.
bool CudaKernelsBuilt();

// The number of CUDA devices the runtime sees: 0 without the kernels, a
// driver or a device.
int CudaDeviceCount();

// Where a device call runs.
struct DeviceLocation {
  // The CUDA device ordinal that holds the buffers. The calling thread's
  // current device is restored on return.
  int device = 0;
  // A cudaStream_t, or nullptr for the legacy default stream (which orders
  // itself after the work of blocking streams, libtorch's default among
  // them). Work already queued on other streams that produces the input
  // must be complete or ordered before the call.
  void* stream = nullptr;
};

// Thread safety: not thread-safe (it reuses device scratch between calls);
// one thread at a time per DeviceCompressor. Separate instances are
// independent.
class DeviceCompressor {
 public:
  // Whether the compressor `name` runs on the device (see the file comment).
  static bool RunsOnDevice(absl::string_view name);

  // Validates `options` as MakeCompressor does (INVALID_ARGUMENT, NOT_FOUND).
  // INVALID_ARGUMENT when the compressor does not run on the device;
  // UNIMPLEMENTED in a build without the kernels. Touches no device: device
  // memory is allocated on first use, per device.
  static absl::StatusOr<std::unique_ptr<DeviceCompressor>> Create(
      const CompressorOptions& options);

  ~DeviceCompressor();
  DeviceCompressor(const DeviceCompressor&) = delete;
  DeviceCompressor& operator=(const DeviceCompressor&) = delete;

  // Error feedback on the device: r += g; c = C(r); r -= D(c), where g is
  // `gradient` and r is `residual`, numel floats each in device memory on
  // where.device (residual owned by the caller, zero before the first call,
  // updated in place; it must not overlap gradient). On return *out holds
  // c (same fields as the CPU compressor fills) and the stream has been
  // synchronised. Errors: INVALID_ARGUMENT for a non-finite gradient
  // element under NonFinitePolicy::kReject (residual unchanged, the same
  // message as the CPU compressor), for host pointers or numel >= 2^32;
  // FAILED_PRECONDITION "no CUDA device: ..." without a usable device;
  // INTERNAL for any other CUDA error. `*out` is unspecified on error.
  absl::Status CompressWithFeedback(const float* gradient, float* residual,
                                    uint64_t numel, const CompressContext& ctx,
                                    DeviceLocation where, CompressedChunk* out);

  // Compresses `input` (numel floats in device memory, unchanged) into
  // *out. Errors as above.
  absl::Status Compress(const float* input, uint64_t numel,
                        const CompressContext& ctx, DeviceLocation where,
                        CompressedChunk* out);

  // The options in force (fp16 and bf16 force their precision).
  const CompressorOptions& options() const;

 private:
  struct State;
  explicit DeviceCompressor(std::unique_ptr<State> state);

  // The options, and device scratch per device, grown on demand.
  std::unique_ptr<State> state_;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CUDA_DEVICE_COMPRESSOR_H_
