#include "server/shard/worker_replicas.h"

#include <vector>

namespace gradwire {

bool WorkerReplicas::Lend(ChunkState* chunk, uint32_t worker,
                          uint64_t have_version, Loan* loan) const {
  auto it = chunk->replicas.find(worker);
  if (it == chunk->replicas.end() || it->second.lent ||
      it->second.version != have_version) {
    return false;
  }
  WorkerReplica& replica = it->second;
  const std::vector<float>& weights = chunk->state.weights;
  loan->worker = worker;
  loan->version = chunk->state.version;
  loan->difference.resize(chunk->numel);
  // Under the chunk's lock: in vector loops.
  SubtractInto(weights, replica.weights, absl::MakeSpan(loan->difference));
  // Swapped, not copied: the replica keeps the loan's old buffer, which
  // Return swaps back.
  loan->replica.swap(replica.weights);
  replica.lent = true;
  return true;
}

bool WorkerReplicas::Build(const Compressor& compressor, uint64_t chunk_key,
                           Loan* loan, CompressedChunk* delta) {
  CompressContext context;
  context.chunk_key = chunk_key;
  context.step = loan->version;
  if (!compressor.Compress(loan->difference, context, delta).ok()) {
    return false;
  }
  AccumulateInto(*delta, 1.0f, absl::MakeSpan(loan->replica));
  return true;
}

void WorkerReplicas::Return(ChunkState* chunk, bool built, Loan* loan) {
  auto it = chunk->replicas.find(loan->worker);
  if (it == chunk->replicas.end() || !it->second.lent) return;
  if (!built) {
    Forget(chunk, loan->worker);
    return;
  }
  it->second.weights.swap(loan->replica);
  it->second.version = loan->version;
  it->second.lent = false;
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
  it->second.lent = false;
}

void WorkerReplicas::Forget(ChunkState* chunk, uint32_t worker) {
  auto it = chunk->replicas.find(worker);
  if (it == chunk->replicas.end()) return;
  bytes_.fetch_sub(chunk->numel * sizeof(float), std::memory_order_relaxed);
  chunk->replicas.erase(it);
}

}  // namespace gradwire
