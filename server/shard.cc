#include "server/shard.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/shard_config.h"

namespace gradwire {
namespace {

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& format,
                     const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// Builds a chunk's initial state from its declaration.
absl::StatusOr<std::unique_ptr<ChunkState>> NewChunk(
    const v1::ChunkDeclaration& declaration, const ShardConfig& config,
    uint64_t max_numel) {
  const uint64_t numel = declaration.initial().numel();
  if (numel == 0 || numel > max_numel) {
    return Invalid("chunk %d: numel %d is outside [1, %d]", declaration.key(),
                   numel, max_numel);
  }
  if (!declaration.initial().has_dense()) {
    return Invalid("chunk %d: initial values must be dense", declaration.key());
  }
  DecodeOptions decode;
  decode.expected_numel = numel;
  CompressedChunk initial;
  if (absl::Status s = DecodeChunk(declaration.initial(), decode, &initial);
      !s.ok()) {
    return Invalid("chunk %d initial values: %s", declaration.key(),
                   s.message());
  }
  ChunkSnapshot state;
  state.key = declaration.key();
  state.tensor_name = declaration.tensor_name();
  state.offset = declaration.offset();
  state.numel = numel;
  state.weights = std::move(initial.values);
  state.workers.resize(config.num_workers);
  if (config.pull_compressor) state.shadow = state.weights;
  return std::make_unique<ChunkState>(std::move(state));
}

}  // namespace

Shard::Shard(ShardOptions options, ShardMetrics* shard_metrics)
    : options_(options), metrics_(shard_metrics) {
  if (metrics_ == nullptr) {
    own_registry_ = std::make_unique<metrics::Registry>();
    // Cannot fail: the names are fixed and the registry is empty.
    own_metrics_ =
        ShardMetrics::Create(own_registry_.get(), options_.shard_id).value();
    metrics_ = own_metrics_.get();
  }
}

Shard::~Shard() = default;

ChunkState* Shard::FindChunk(uint64_t key) const {
  const auto it = chunks_.find(key);
  return it == chunks_.end() ? nullptr : it->second.get();
}

absl::Status Shard::Init(const v1::InitRequest& request,
                         v1::InitResponse* response) {
  uint64_t ticket = 0;
  absl::Status status = InitLocked(request, response, &ticket);
  if (status.ok() && !response->initialized_now()) {
    RejoinByInit(request, &ticket);
  }
  if (ticket != 0) journal_->WaitDurable(ticket);
  return status;
}

absl::Status Shard::InitLocked(const v1::InitRequest& request,
                               v1::InitResponse* response,
                               uint64_t* journal_ticket) {
  absl::MutexLock lock(&init_mu_);
  if (initialized()) {
    if (absl::Status s = CompareWithAccepted(request); !s.ok()) return s;
    response->set_initialized_now(false);
  } else {
    auto config = ShardConfig::FromProto(request.config(), options_);
    if (!config.ok()) return config.status();
    // Checked before anything is allocated: a few bytes per declared chunk
    // would otherwise buy num_workers progress entries each.
    const uint64_t progress_entries =
        static_cast<uint64_t>(request.chunks_size()) * (*config)->num_workers;
    if (progress_entries > options_.max_worker_progress_entries) {
      return Invalid(
          "Init declares %d chunks for num_workers %d: %d worker-progress "
          "entries exceed this shard's limit of %d",
          request.chunks_size(), (*config)->num_workers, progress_entries,
          options_.max_worker_progress_entries);
    }
    std::map<uint64_t, std::unique_ptr<ChunkState>> chunks;
    for (const v1::ChunkDeclaration& declaration : request.chunks()) {
      auto chunk = NewChunk(declaration, **config, options_.max_chunk_numel);
      if (!chunk.ok()) return chunk.status();
      if (!chunks.emplace(declaration.key(), std::move(*chunk)).second) {
        return Invalid("chunk %d is declared twice", declaration.key());
      }
    }
    if (absl::Status s = CheckInitIdentity(request, **config); !s.ok()) {
      return s;
    }
    ResetWorkerActivity((*config)->num_workers);
    config_ = std::move(*config);
    chunks_ = std::move(chunks);
    initialized_.store(true, std::memory_order_release);
    response->set_initialized_now(true);
    if (journal_ != nullptr) {
      *journal_ticket = journal_->Append(JournalRecordType::kInit,
                                         request.SerializeAsString());
    }
  }
  FillInitResponse(request, response);
  return absl::OkStatus();
}

void Shard::ResetWorkerActivity(uint32_t num_workers) {
  last_push_nanos_ = std::make_unique<std::atomic<int64_t>[]>(num_workers);
  for (uint32_t w = 0; w < num_workers; ++w) {
    last_push_nanos_[w].store(0, std::memory_order_relaxed);
  }
  live_ = std::make_unique<std::atomic<bool>[]>(num_workers);
  for (uint32_t w = 0; w < num_workers; ++w) {
    live_[w].store(true, std::memory_order_relaxed);
  }
}

uint32_t Shard::ActiveWorkers(absl::Time now, absl::Duration window) const {
  if (!initialized()) return 0;
  const int64_t since = absl::ToUnixNanos(now - window);
  uint32_t active = 0;
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    const int64_t last = last_push_nanos_[w].load(std::memory_order_relaxed);
    if (last != 0 && last >= since) ++active;
  }
  return active;
}

absl::Status Shard::CheckInitIdentity(const v1::InitRequest& request,
                                      const ShardConfig& config) const {
  if (request.shard_id() != options_.shard_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("Init is addressed to shard %d but this is shard %d",
                        request.shard_id(), options_.shard_id));
  }
  if (request.worker_id() >= config.num_workers) {
    return absl::OutOfRangeError(
        absl::StrFormat("worker id %d is outside [0, %d)", request.worker_id(),
                        config.num_workers));
  }
  if (request.chunks().empty()) {
    return Invalid("Init declares no chunks");
  }
  return absl::OkStatus();
}

absl::Status Shard::CompareWithAccepted(const v1::InitRequest& request) const {
  if (absl::Status s = CheckInitIdentity(request, *config_); !s.ok()) return s;
  std::string difference;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&difference);
  if (!differ.Compare(config_->proto, request.config())) {
    return absl::FailedPreconditionError(
        "Init conflicts with the accepted training config: " + difference);
  }
  if (static_cast<size_t>(request.chunks_size()) != chunks_.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Init declares %d chunks but the accepted Init declared %d",
        request.chunks_size(), chunks_.size()));
  }
  absl::flat_hash_set<uint64_t> seen;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    // With as many declarations as accepted chunks, a repeated key would
    // hide a missing one.
    if (!seen.insert(declaration.key()).second) {
      return Invalid("chunk %d is declared twice", declaration.key());
    }
    const ChunkState* chunk = FindChunk(declaration.key());
    if (chunk == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Init declares chunk %d, which the accepted Init did not",
          declaration.key()));
    }
    if (chunk->numel != declaration.initial().numel()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Init declares chunk %d with numel %d but the accepted Init had %d",
          declaration.key(), declaration.initial().numel(), chunk->numel));
    }
  }
  return absl::OkStatus();
}

void Shard::FillInitResponse(const v1::InitRequest& request,
                             v1::InitResponse* response) const {
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    const ChunkState* chunk = FindChunk(declaration.key());
    absl::MutexLock lock(&chunk->mu);
    response->add_versions(chunk->state.version);
    response->add_next_steps(
        chunk->state.workers[request.worker_id()].next_step);
  }
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
