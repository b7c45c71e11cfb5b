#include "server/shard/init_budget.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_format.h"
#include "server/shard/chunk_state.h"

namespace gradwire {
namespace {

// glibc malloc adds an 8-byte header and rounds to 16 bytes with a 32-byte
// minimum, so a block costs at most 31 bytes more than asked for; 32 is
// that bound, rounded up.
constexpr uint64_t kAllocatorOverheadPerBlock = 32;

// Blocks from this size up may be mapped on their own (glibc's default
// M_MMAP_THRESHOLD), and a mapping is rounded up to whole pages.
constexpr uint64_t kMmapThresholdBytes = uint64_t{128} << 10;

// What a block of `bytes` costs: the request, the allocator's overhead and,
// for a block that may be mapped on its own, up to a page of rounding.
uint64_t BlockBytes(uint64_t bytes) {
  static const uint64_t page_bytes =
      static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t rounding = bytes >= kMmapThresholdBytes ? page_bytes : 0;
  return bytes + kAllocatorOverheadPerBlock + rounding;
}

// The blocks of fixed size each chunk owns after Init: the ChunkState, its
// map node, the tensor name (counted even when it fits the string's inline
// buffer), the weights and the shadow. The weights' and the shadow's
// elements are the model; their blocks' overhead is not. (Their page
// rounding, less than a page per block of 128 KiB or more, counts as
// model.)
constexpr uint64_t kFixedBlocksPerChunk = 5;

// A std::map node holds the value and the tree's links: a colour word and
// three pointers in libstdc++ and libc++.
constexpr uint64_t kMapNodeBytes =
    sizeof(ChunkMap::value_type) + sizeof(void*) + 3 * sizeof(void*);

// The InitResponse's version and next step of each chunk: two uint64s in
// repeated fields that double as they grow, so at most twice that.
constexpr uint64_t kResponseBytesPerChunk = 2 * 2 * sizeof(uint64_t);

constexpr uint64_t kBytesPerChunk =
    sizeof(ChunkState) + kMapNodeBytes + kResponseBytesPerChunk +
    kFixedBlocksPerChunk * kAllocatorOverheadPerBlock;

// What the shard keeps per worker outside the chunks (WorkerPresence: an
// array of last push times, one of live flags and one of revived-by-Init
// marks).
uint64_t PresenceBytes(uint32_t num_workers) {
  return BlockBytes(uint64_t{num_workers} * sizeof(std::atomic<int64_t>)) +
         2 * BlockBytes(uint64_t{num_workers} * sizeof(std::atomic<bool>));
}

// One chunk's per-worker blocks: a WorkerProgress each, and the live set's
// one bit each, stored in 64-bit words.
uint64_t WorkerBytesPerChunk(uint32_t num_workers) {
  const uint64_t live_set_words = (uint64_t{num_workers} + 63) / 64;
  return BlockBytes(uint64_t{num_workers} * sizeof(WorkerProgress)) +
         BlockBytes(live_set_words * sizeof(uint64_t));
}

}  // namespace

uint64_t EstimateInitOverheadBytes(const v1::InitRequest& request,
                                   uint32_t num_workers) {
  // Names fit in a request (at most 2 GiB) and chunk and worker counts in
  // 32 bits, so no term below can overflow 64 bits.
  uint64_t name_bytes = 0;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    name_bytes += declaration.tensor_name().size() + 1;
  }
  const uint64_t chunks = static_cast<uint64_t>(request.chunks_size());
  return PresenceBytes(num_workers) + name_bytes +
         chunks * (kBytesPerChunk + WorkerBytesPerChunk(num_workers));
}

absl::Status CheckInitBudget(const v1::InitRequest& request,
                             uint32_t num_workers,
                             const ShardOptions& options) {
  const uint64_t chunks = static_cast<uint64_t>(request.chunks_size());
  if (chunks > options.max_chunks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init declares %d chunks but this shard accepts at most %d "
        "(--max-chunks)",
        chunks, options.max_chunks));
  }
  const uint64_t estimate = EstimateInitOverheadBytes(request, num_workers);
  if (estimate > options.max_init_overhead_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init of %d chunks for %d workers would cost the shard an estimated "
        "%d bytes of bookkeeping beyond the model data, over its limit of %d "
        "bytes (--max-init-overhead-bytes)",
        chunks, num_workers, estimate, options.max_init_overhead_bytes));
  }
  return absl::OkStatus();
}

uint64_t ModelStateBytesPerElement(const ShardConfig& config) {
  uint64_t bytes = sizeof(float);  // the weights
  if (config.shared_deltas()) bytes += sizeof(float);
  if (config.proto.mode() == v1::CONSISTENCY_MODE_BSP) bytes += sizeof(float);
  switch (config.proto.optimizer().kind()) {
    case v1::OPTIMIZER_KIND_MOMENTUM:
      bytes += sizeof(float);
      break;
    case v1::OPTIMIZER_KIND_ADAM:
    case v1::OPTIMIZER_KIND_ADAMW:
      bytes += 2 * sizeof(float);
      break;
    default:
      break;
  }
  if (config.pull_compressor != nullptr && config.per_worker_deltas) {
    bytes += uint64_t{config.num_workers} * sizeof(float);
  }
  return bytes;
}

absl::Status CheckModelFits(const ShardConfig& config, uint64_t numel,
                            const ShardOptions& options) {
  if (options.memory_limit_bytes == 0) return absl::OkStatus();
  // A checkpoint holds a copy of the state while it is written.
  const uint64_t per_element =
      ModelStateBytesPerElement(config) * (options.checkpoints ? 2 : 1);
  const uint64_t room = 2 * options.max_message_bytes;
  const uint64_t available =
      options.memory_limit_bytes > room ? options.memory_limit_bytes - room : 0;
  // Saturates rather than wraps: numel and the worker count come from a
  // request.
  const uint64_t needed = numel > UINT64_MAX / per_element
                              ? UINT64_MAX - room
                              : numel * per_element;
  if (needed <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "this shard's part of the model, %d elements, needs %d bytes of "
      "state in this configuration (%d bytes per element: weights, "
      "optimizer state, step sum, pull shadow or replicas%s), but the shard "
      "may hold %d bytes in all (--memory-limit-bytes) less %d for two "
      "messages in flight (2 x --max-message-bytes); raise "
      "--memory-limit-bytes to at least %d on a host that has it, or spread "
      "the model over more shards (--num-shards)",
      numel, needed, per_element,
      options.checkpoints ? ", twice while a checkpoint copies it" : "",
      options.memory_limit_bytes, room, needed + room));
}

uint64_t DeclaredElements(const v1::InitRequest& request) {
  uint64_t numel = 0;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    numel += declaration.initial().numel();
  }
  return numel;
}

}  // namespace gradwire
