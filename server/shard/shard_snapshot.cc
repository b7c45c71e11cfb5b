// Shard::Snapshot, Restore and StateDigest.
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/shard/shard.h"
#include "server/shard/worker_presence.h"

namespace gradwire {
namespace {

// FNV-1a over raw bytes: a stable digest for tests.
class Digest {
 public:
  void Add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash_ = (hash_ ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  template <typename T>
  void Add(const T& value) {
    Add(&value, sizeof value);
  }
  template <typename T>
  void Add(const std::vector<T>& values) {
    Add(values.size());
    Add(values.data(), values.size() * sizeof(T));
  }
  // Every field of `s` that a snapshot holds, the shadow only when
  // `with_shadow`.
  void AddChunk(const ChunkSnapshot& s, bool with_shadow) {
    Add(s.key);
    Add(s.version);
    Add(s.clock);
    Add(s.weights);
    Add(s.optimizer.updates);
    Add(s.optimizer.first_moment);
    Add(s.optimizer.second_moment);
    Add(s.accumulator);
    Add(s.pending_pushes);
    for (const WorkerProgress& w : s.workers) {
      Add(w.next_step);
      Add(w.ahead_bits);
    }
    if (with_shadow) Add(s.shadow);
    Add(s.live.Dropped());
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// A NaN or infinity in a restored chunk would spread into every update and
// every pull after it, so the shard refuses it as it refuses a non-finite
// pushed value. Names the first bad element.
absl::Status CheckFinite(const ChunkSnapshot& c) {
  const std::pair<const char*, const std::vector<float>*> arrays[] = {
      {"weights", &c.weights},
      {"optimizer first moment", &c.optimizer.first_moment},
      {"optimizer second moment", &c.optimizer.second_moment},
      {"accumulator", &c.accumulator},
      {"shadow", &c.shadow}};
  for (const auto& [name, values] : arrays) {
    for (size_t i = 0; i < values->size(); ++i) {
      if (!std::isfinite((*values)[i])) {
        return absl::InvalidArgumentError(
            absl::StrFormat("checkpoint chunk %d: %s[%d] is %g, not finite",
                            c.key, name, i, (*values)[i]));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChunkSnapshot(const ChunkSnapshot& c,
                                const ShardConfig& config) {
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("checkpoint chunk %d: %s", c.key, what));
  };
  if (c.numel == 0 || c.weights.size() != c.numel) return bad("weights size");
  if (!c.accumulator.empty() && c.accumulator.size() != c.numel) {
    return bad("accumulator size");
  }
  // The optimizer indexes its buffers up to numel once they exist: a short
  // one would be read and written out of bounds on the first update.
  if (!c.optimizer.first_moment.empty() &&
      c.optimizer.first_moment.size() != c.numel) {
    return bad("optimizer first moment (momentum buffer) size");
  }
  if (!c.optimizer.second_moment.empty() &&
      c.optimizer.second_moment.size() != c.numel) {
    return bad("optimizer second moment size");
  }
  // Past 1-bit Adam's freeze every update divides by the second moment.
  const uint64_t freeze = config.optimizer_settings.freeze_variance_after;
  if (freeze > 0 && c.optimizer.updates >= freeze &&
      c.optimizer.second_moment.empty()) {
    return bad("optimizer second moment missing after the variance froze");
  }
  if (c.workers.size() != config.num_workers) return bad("worker count");
  if (c.live.num_workers() != config.num_workers) return bad("live set size");
  if (!c.shadow.empty() && c.shadow.size() != c.numel)
    return bad("shadow size");
  if (c.pending_pushes >= config.num_workers) return bad("pending pushes");
  return CheckFinite(c);
}

}  // namespace

absl::StatusOr<ShardSnapshot> Shard::Snapshot() const {
  if (!initialized()) {
    return absl::FailedPreconditionError("shard is not initialised");
  }
  ShardSnapshot snapshot;
  snapshot.shard_id = options_.shard_id;
  snapshot.num_shards = options_.num_shards;
  snapshot.training_config = config_->proto.SerializeAsString();
  snapshot.chunks.reserve(chunks_.size());
  // Every record is appended, and its sequence noted, under the locks of what
  // it changed (init_mu_ for the first Init, chunk locks for the rest), after
  // it was applied. With all of them held, no record is half applied: the
  // copy holds exactly the records up to journal_sequence_.
  absl::MutexLock init_lock(&init_mu_);
  ChunkLocks locks(chunks_);
  for (const auto& [key, chunk] : chunks_) {
    chunk->mu.AssertHeld();
    snapshot.chunks.push_back(chunk->state);
  }
  snapshot.journal_sequence = journal_sequence();
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    if (workers_->RevivedByInit(w)) snapshot.revived_by_init.push_back(w);
  }
  return snapshot;
}

absl::Status Shard::Restore(ShardSnapshot snapshot) {
  absl::MutexLock lock(&init_mu_);
  if (initialized()) {
    return absl::FailedPreconditionError("shard is already initialised");
  }
  if (snapshot.shard_id != options_.shard_id ||
      snapshot.num_shards != options_.num_shards) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint is of shard %d of %d, this is shard %d of %d",
        snapshot.shard_id, snapshot.num_shards, options_.shard_id,
        options_.num_shards));
  }
  v1::TrainingConfig proto;
  if (!proto.ParseFromString(snapshot.training_config)) {
    return absl::InvalidArgumentError("checkpoint training config is corrupt");
  }
  auto config = ShardConfig::FromProto(proto, options_);
  if (!config.ok()) return config.status();
  if (snapshot.chunks.empty()) {
    return absl::InvalidArgumentError("checkpoint has no chunks");
  }
  const uint32_t num_workers = (*config)->num_workers;
  for (uint32_t w : snapshot.revived_by_init) {
    if (w >= num_workers) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "checkpoint: revived worker %d is outside [0, %d)", w, num_workers));
    }
  }
  ChunkMap chunks;
  const uint64_t journal_sequence = snapshot.journal_sequence.value_or(0);
  // A worker is live shard-wide while some chunk's live set holds it (a
  // push rejoins chunk by chunk).
  std::vector<bool> live_somewhere(num_workers, false);
  for (ChunkSnapshot& c : snapshot.chunks) {
    if (absl::Status s = CheckChunkSnapshot(c, **config); !s.ok()) return s;
    for (uint32_t w = 0; w < num_workers; ++w) {
      if (c.live.IsLive(w)) live_somewhere[w] = true;
    }
    if ((*config)->shared_deltas() && c.shadow.empty()) {
      c.shadow = c.weights;
    }
    const uint64_t key = c.key;
    if (!chunks.emplace(key, std::make_unique<ChunkState>(std::move(c)))
             .second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint chunk %d appears twice", key));
    }
  }
  Install(*std::move(config), std::move(chunks));
  for (uint32_t w = 0; w < num_workers; ++w) {
    workers_->SetLive(w, live_somewhere[w]);
  }
  for (uint32_t w : snapshot.revived_by_init) {
    workers_->SetRevivedByInit(w, true);
  }
  journal_sequence_.store(journal_sequence, std::memory_order_release);
  return absl::OkStatus();
}

uint64_t Shard::StateDigest(bool with_shadow) const {
  Digest digest;
  digest.Add(initialized());
  if (!initialized()) return digest.value();
  for (const auto& [key, chunk] : chunks_) {
    absl::MutexLock lock(&chunk->mu);
    digest.AddChunk(chunk->state, with_shadow);
  }
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    digest.Add(workers_->RevivedByInit(w));
  }
  return digest.value();
}

}  // namespace gradwire
