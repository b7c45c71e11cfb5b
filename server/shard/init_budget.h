// What a first Init costs the shard beyond the model data it carries, and
// the check of that cost against the shard's limits (internal to
// server/shard/).
//
// An Init's initial values are the model itself: the weights, the pull
// shadow and, after pushes, the BSP sum and the optimizer state are each at
// most numel floats, and numel floats at 2 or 4 bytes each must be in the
// request. What a small request can amplify is everything else: the state
// of every declared chunk and, in it, the progress and live-set entry of
// every worker. Both are bounded here, from the request alone, before the
// shard allocates any of it.
#ifndef GRADWIRE_SERVER_SHARD_INIT_BUDGET_H_
#define GRADWIRE_SERVER_SHARD_INIT_BUDGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"
#include "server/shard/shard_config.h"

namespace gradwire {

// An upper bound of the bytes a first Init of `request` for `num_workers`
// workers makes the shard allocate (and keep) beyond its chunks' element
// data (weights and pull shadow):
//   num_workers x the shard-wide presence entry of a worker, plus
//   for each declared chunk: a bookkeeping constant (the ChunkState, its
//   map node, the allocator's overhead of the chunk's fixed-size blocks,
//   the chunk's entries in the InitResponse) + the tensor name's bytes +
//   num_workers x (a WorkerProgress + a live-set bit), each array with its
//   allocator overhead.
// Objects of fixed size (config, updater, compressors) are not counted.
// The allocator overhead assumed per block covers glibc malloc: a header
// word and 16-byte rounding (at most 31 bytes over the request), and a page
// of rounding for a block large enough to be mapped on its own.
// Pure: reads nothing but its arguments (and the page size); O(chunks)
// time, no allocation; thread-safe.
uint64_t EstimateInitOverheadBytes(const v1::InitRequest& request,
                                   uint32_t num_workers);

// OK when a first Init of `request` for `num_workers` workers fits
// `options`: at most options.max_chunks chunks and an estimate
// (EstimateInitOverheadBytes) of at most options.max_init_overhead_bytes.
// Otherwise RESOURCE_EXHAUSTED naming the count or the estimate, the limit
// and its gradwire-server flag (--max-chunks, --max-init-overhead-bytes).
// Call before allocating anything for the request's chunks.
absl::Status CheckInitBudget(const v1::InitRequest& request,
                             uint32_t num_workers, const ShardOptions& options);

// What the shard holds per element of its model for `config`, in bytes:
// the weights (4), the shared pull shadow (4, with shared pull deltas), the
// BSP step's sum (4), the optimizer's state (momentum 4, Adam and AdamW 8)
// and, with per-worker ASP/SSP pull replicas, 4 per worker. Bookkeeping per
// chunk and the buffers of requests in flight (the memory budget) are not
// counted.
uint64_t ModelStateBytesPerElement(const ShardConfig& config);

// OK when `numel` elements of model state (ModelStateBytesPerElement, twice
// with options.checkpoints) leave
// room for two messages of options.max_message_bytes (one push being
// decoded, one pull answer being built) under options.memory_limit_bytes,
// or when there is no limit (0). Otherwise RESOURCE_EXHAUSTED naming the
// elements, the bytes per element and in all, the limit, and what to change
// (--memory-limit-bytes, more shards).
absl::Status CheckModelFits(const ShardConfig& config, uint64_t numel,
                            const ShardOptions& options);

// The elements an Init declares (each declaration's initial.numel()).
uint64_t DeclaredElements(const v1::InitRequest& request);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_INIT_BUDGET_H_
