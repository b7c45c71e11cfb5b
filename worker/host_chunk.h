// A chunk of a CPU tensor as the compressors and the codec take it: a span
// of floats over the tensor's own memory, no copy. (Chunks of CUDA tensors:
// device_chunks.h.)
//
// Thread safety: a view; the caller keeps the tensor alive and orders
// reads and writes.
#ifndef GRADWIRE_WORKER_HOST_CHUNK_H_
#define GRADWIRE_WORKER_HOST_CHUNK_H_

#include <torch/types.h>

#include <cstdint>

#include "absl/types/span.h"

namespace gradwire {

// Elements [offset, offset + numel) of `tensor`, a contiguous float32 CPU
// tensor with at least offset + numel elements.
inline absl::Span<float> HostChunk(const torch::Tensor& tensor, uint64_t offset,
                                   uint64_t numel) {
  return absl::MakeSpan(tensor.data_ptr<float>() + offset, numel);
}

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_HOST_CHUNK_H_
