#include "server/shard/worker_replicas.h"

#include <vector>

namespace gradwire {

bool WorkerReplicas::TakeDelta(ChunkState* chunk, uint32_t worker,
                               uint64_t have_version,
                               const Compressor& compressor,
                               CompressedChunk* delta) const {
  auto it = chunk->replicas.find(worker);
  if (it == chunk->replicas.end() || it->second.version != have_version) {
    return false;
  }
  WorkerReplica& replica = it->second;
  const std::vector<float>& weights = chunk->state.weights;
  thread_local std::vector<float> difference;
  difference.resize(chunk->numel);
  for (uint64_t i = 0; i < chunk->numel; ++i) {
    difference[i] = weights[i] - replica.weights[i];
  }
  CompressContext context;
  context.chunk_key = chunk->key;
  context.step = chunk->state.version;
  // Fails only on non-finite input, which finite weights never give; the
  // caller then answers dense.
  if (!compressor.Compress(difference, context, delta).ok()) return false;
  AccumulateInto(*delta, 1.0f, absl::MakeSpan(replica.weights));
  replica.version = chunk->state.version;
  return true;
}

void WorkerReplicas::Record(ChunkState* chunk, uint32_t worker) {
  const std::vector<float>& weights = chunk->state.weights;
  auto it = chunk->replicas.find(worker);
  if (it == chunk->replicas.end()) {
    const uint64_t size = chunk->numel * sizeof(float);
    uint64_t held = bytes_.load(std::memory_order_relaxed);
    do {
      if (held + size > max_bytes_) return;
    } while (!bytes_.compare_exchange_weak(held, held + size,
                                           std::memory_order_relaxed));
    it = chunk->replicas.try_emplace(worker).first;
  }
  it->second.weights.assign(weights.begin(), weights.end());
  it->second.version = chunk->state.version;
}

void WorkerReplicas::Forget(ChunkState* chunk, uint32_t worker) {
  auto it = chunk->replicas.find(worker);
  if (it == chunk->replicas.end()) return;
  bytes_.fetch_sub(chunk->numel * sizeof(float), std::memory_order_relaxed);
  chunk->replicas.erase(it);
}

}  // namespace gradwire
