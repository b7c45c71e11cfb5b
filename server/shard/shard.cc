// Shard: construction, becoming initialised, and the read-only views (Info,
// ActiveWorkers). The operations have files of their own (shard.h).
#include "server/shard/shard.h"

#include <algorithm>

#include "absl/random/random.h"
#include "common/threads/thread_pool.h"
#include "common/usable_cpus.h"
#include "server/shard/chunk_updater.h"
#include "server/shard/worker_presence.h"

namespace gradwire {
namespace {

// A random non-zero epoch. Not persisted: two processes that restored the
// same checkpoint differ, and 0 stays free for "no history" on the wire.
uint64_t DrawHistoryEpoch() {
  absl::BitGen random;
  uint64_t epoch = 0;
  while (epoch == 0) epoch = absl::Uniform<uint64_t>(random);
  return epoch;
}

}  // namespace

Shard::Shard(ShardOptions options, ShardMetrics* shard_metrics)
    : options_(options),
      history_epoch_(options.history_epoch != 0 ? options.history_epoch
                                                : DrawHistoryEpoch()),
      memory_budget_(options.memory_budget_bytes,
                     [this](absl::string_view what) {
                       metrics_->CountMemoryBudgetRefusal(what);
                     }),
      metrics_(shard_metrics),
      replicas_(options.max_replica_bytes) {
  memory_budget_.set_reclaimer(
      [this](uint64_t needed) { return ReclaimKeptDeltas(needed); });
  if (metrics_ == nullptr) {
    own_registry_ = std::make_unique<metrics::Registry>();
    // Cannot fail: the names are fixed and the registry is empty.
    own_metrics_ =
        ShardMetrics::Create(own_registry_.get(), options_.shard_id).value();
    metrics_ = own_metrics_.get();
  }
  const int helpers =
      options_.apply_threads >= 0 ? options_.apply_threads : UsableCpus() - 1;
  if (helpers > 0) {
    ThreadPoolOptions pool;
    pool.threads = helpers;
    apply_pool_ = std::make_unique<ThreadPool>(pool);
  }
}

Shard::~Shard() = default;

ChunkState* Shard::FindChunk(uint64_t key) const {
  const auto it = chunks_.find(key);
  return it == chunks_.end() ? nullptr : it->second.get();
}

void Shard::Install(std::unique_ptr<const ShardConfig> config,
                    ChunkMap chunks) {
  workers_ = std::make_unique<WorkerPresence>(config->num_workers);
  updater_ =
      std::make_unique<ChunkUpdater>(config.get(), metrics_, &updates_applied_);
  // Kept pull deltas are reserved against the shard's budget from the
  // first publication on (published_deltas.h).
  for (const auto& [key, chunk] : chunks) {
    absl::MutexLock lock(&chunk->mu);
    chunk->published.set_budget(&memory_budget_);
  }
  config_ = std::move(config);
  chunks_ = std::move(chunks);
  initialized_.store(true, std::memory_order_release);
}

uint64_t Shard::ReclaimKeptDeltas(uint64_t needed) {
  if (!initialized()) return 0;
  // Every kept delta's sequence and chunk, oldest first. A chunk whose lock
  // is taken is passed over: the reserving thread may hold it (a
  // publication, a pull answer being built), and waiting for a lock here
  // could deadlock.
  std::vector<std::pair<uint64_t, ChunkState*>> kept;
  std::vector<uint64_t> sequences;
  for (const auto& [key, chunk] : chunks_) {
    if (!chunk->mu.TryLock()) continue;
    sequences.clear();
    chunk->published.AppendKeptSequences(&sequences);
    chunk->mu.Unlock();
    for (uint64_t sequence : sequences)
      kept.emplace_back(sequence, chunk.get());
  }
  std::sort(kept.begin(), kept.end());
  uint64_t released = 0;
  for (const auto& [sequence, chunk] : kept) {
    if (released >= needed) break;
    if (!chunk->mu.TryLock()) continue;
    const uint64_t bytes = chunk->published.DropKeptThrough(sequence);
    chunk->mu.Unlock();
    if (bytes > 0) metrics_->CountKeptDeltaReclaimed();
    released += bytes;
  }
  return released;
}

uint32_t Shard::ActiveWorkers(absl::Time now, absl::Duration window) const {
  if (!initialized()) return 0;
  return workers_->PushedSince(absl::ToUnixNanos(now - window));
}

v1::ShardInfo Shard::Info() const {
  v1::ShardInfo info;
  info.set_shard_id(options_.shard_id);
  info.set_num_shards(options_.num_shards);
  info.set_build_version(GRADWIRE_VERSION_STRING);
  if (!initialized()) return info;
  info.set_initialized(true);
  *info.mutable_config() = config_->proto;
  info.set_live_workers(LiveWorkers());
  uint64_t min_version = UINT64_MAX, max_version = 0, min_clock = UINT64_MAX;
  for (const auto& [key, chunk] : chunks_) {
    absl::MutexLock lock(&chunk->mu);
    info.set_num_chunks(info.num_chunks() + 1);
    info.set_num_elements(info.num_elements() + chunk->numel);
    min_version = std::min(min_version, chunk->state.version);
    max_version = std::max(max_version, chunk->state.version);
    min_clock = std::min(min_clock, chunk->state.clock);
  }
  info.set_min_version(chunks_.empty() ? 0 : min_version);
  info.set_max_version(max_version);
  info.set_min_clock(chunks_.empty() ? 0 : min_clock);
  return info;
}

}  // namespace gradwire
