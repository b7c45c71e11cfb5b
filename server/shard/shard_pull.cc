// Shard::Pull: wait for the asked step, then answer dense or delta (or,
// under optimizer MEAN, the step's mean whole).
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "common/precision.h"
#include "server/shard/memory_budget.h"
#include "server/shard/shard.h"
#include "server/shard/whole_weights.h"

namespace gradwire {
namespace {

// What one chunk's answer adds besides its values (key, version, clock,
// numel, encoding tags): a bound for the estimate, not an exact count.
constexpr uint64_t kChunkAnswerOverheadBytes = 64;

// Waits until the clock of `chunk` (whose lock is held) reaches `wanted`,
// adding the time waited to *waited when set. DEADLINE_EXCEEDED when
// `deadline` passes first.
absl::Status AwaitClock(ChunkState* chunk, uint64_t wanted, absl::Time deadline,
                        absl::Duration* waited)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu) {
  // Runs under the lock, inside Await.
  const auto reached = [chunk, wanted]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return chunk->state.clock >= wanted;
  };
  if (reached()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const bool arrived =
      chunk->mu.AwaitWithDeadline(absl::Condition(&reached), deadline);
  if (waited != nullptr) *waited += absl::Now() - start;
  if (arrived) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrFormat(
      "chunk %d: clock %d did not reach step %d before the deadline",
      chunk->key, chunk->state.clock, wanted));
}

// Waits until the clock of `chunk` reaches `wanted` (see AwaitClock).
absl::Status AwaitStep(ChunkState* chunk, uint64_t wanted, absl::Time deadline,
                       absl::Duration* waited) {
  absl::MutexLock lock(&chunk->mu);
  return AwaitClock(chunk, wanted, deadline, waited);
}

// How the shard answers pulls, and the worker's standing for deltas.
struct PullAnswering {
  // The shard's pull compressor; null: dense answers only.
  const Compressor* compressor = nullptr;
  // Per-worker replicas (worker_replicas.h); null where the chunks'
  // shared published deltas answer.
  WorkerReplicas* replicas = nullptr;
  // The worker's version counts in this shard's history epoch; without it
  // the version may name other weights.
  bool same_history = false;
  // Optimizer MEAN: the weights go out whole, as EncodeMean encodes them.
  bool means = false;
};

// The answer to a worker that is current: an empty delta, a few bytes
// instead of the chunk.
void AnswerCurrent(uint64_t numel, v1::ChunkWeights* out) {
  out->set_is_delta(true);
  out->mutable_data()->set_numel(numel);
  out->mutable_data()->mutable_sparse()->set_value_type(v1::VALUE_TYPE_FP32);
}

// Encoded bytes of `deltas`.
uint64_t ChainBytes(absl::Span<const v1::ChunkData* const> deltas) {
  uint64_t bytes = 0;
  for (const v1::ChunkData* delta : deltas) bytes += delta->ByteSizeLong();
  return bytes;
}

// The locked answer from shared published deltas (published_deltas.h).
// Publishes first when the pull needs newer weights than the last
// publication: the worker holds that publication already, or the pull's
// min_step (SSP) is past the clock it was made at. Then answers the deltas
// from the worker's version when it holds a published one (several only
// when the request takes a chain, and only while they are smaller than
// the dense chunk), else the dense shadow at fp32.
absl::Status AnswerFromPublished(ChunkState* chunk, const v1::ChunkPull& pull,
                                 const v1::PullRequest& request,
                                 const PullAnswering& answering,
                                 v1::ChunkWeights* out)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu) {
  PublishedDeltas& published = chunk->published;
  const bool delta_allowed = request.allow_delta() && answering.same_history;
  if ((delta_allowed && pull.have_version() == published.version()) ||
      pull.min_step() > published.clock()) {
    PublishPullDelta(*answering.compressor, chunk);
  }
  out->set_version(published.version());
  if (delta_allowed && published.version() > 0 &&
      pull.have_version() == published.version()) {
    AnswerCurrent(chunk->numel, out);
    return absl::OkStatus();
  }
  thread_local std::vector<const v1::ChunkData*> chain;
  if (delta_allowed && published.ChainFrom(pull.have_version(), &chain) &&
      (chain.size() == 1 || request.allow_delta_chain()) &&
      ChainBytes(chain) < chunk->numel * sizeof(float)) {
    out->set_is_delta(true);
    *out->mutable_data() = *chain.front();
    for (size_t i = 1; i < chain.size(); ++i) *out->add_chain() = *chain[i];
    return absl::OkStatus();
  }
  // Workers on deltas must hold exactly the shadow, so it goes out at full
  // precision.
  out->set_is_delta(false);
  return EncodeDense(chunk->state.shadow, ValuePrecision::kFp32,
                     out->mutable_data());
}

// The locked part of PullOne. Returns true with *loan filled when the
// answer is a delta from the worker's replica, which the caller builds
// without the lock (WorkerReplicas::Build); otherwise answers into *out.
bool AnswerLocked(ChunkState* chunk, const v1::ChunkPull& pull,
                  const v1::PullRequest& request,
                  const PullAnswering& answering, v1::ChunkWeights* out,
                  WorkerReplicas::Loan* loan, absl::Status* status) {
  const bool deltas = answering.compressor != nullptr;
  absl::MutexLock lock(&chunk->mu);
  // Read through chunk->state: clang's analysis does not follow a const
  // reference to a guarded field.
  ChunkSnapshot& state = chunk->state;
  out->set_key(chunk->key);
  out->set_version(state.version);
  out->set_clock(state.clock);
  *status = absl::OkStatus();
  if (deltas && answering.replicas == nullptr) {
    *status = AnswerFromPublished(chunk, pull, request, answering, out);
    return false;
  }
  const bool delta_allowed =
      deltas && request.allow_delta() && answering.same_history;
  if (delta_allowed && state.version > 0 &&
      pull.have_version() == state.version) {
    AnswerCurrent(chunk->numel, out);
    return false;
  }
  if (answering.replicas != nullptr) {
    if (delta_allowed && answering.replicas->Lend(chunk, request.worker_id(),
                                                  pull.have_version(), loan)) {
      return true;
    }
    // The worker's replica, if it takes deltas, starts from this answer.
    out->set_is_delta(false);
    if (request.allow_delta()) {
      answering.replicas->Record(chunk, request.worker_id());
    }
    *status =
        EncodeDense(state.weights, ValuePrecision::kFp32, out->mutable_data());
    return false;
  }
  out->set_is_delta(false);
  if (answering.means) {
    *status = EncodeMean(state.weights, out->mutable_data());
    return false;
  }
  const ValuePrecision precision =
      FromWire(request.dense_value_type()).value_or(ValuePrecision::kFp32);
  *status = EncodeDense(state.weights, precision, out->mutable_data());
  return false;
}

// Answers one chunk of a pull whose clock reached the asked step (clocks
// only grow): an empty delta when the worker is current, deltas when it
// can take them (from a published version, or from its replica), dense
// weights otherwise. A per-worker delta is compressed and encoded outside
// the chunk's lock (worker_replicas.h), so pushes wait only for the
// difference.
absl::Status PullOne(ChunkState* chunk, const v1::ChunkPull& pull,
                     const v1::PullRequest& request,
                     const PullAnswering& answering, v1::ChunkWeights* out) {
  thread_local WorkerReplicas::Loan loan;
  absl::Status status;
  if (!AnswerLocked(chunk, pull, request, answering, out, &loan, &status)) {
    return status;
  }
  thread_local CompressedChunk delta;
  const bool built =
      WorkerReplicas::Build(*answering.compressor, chunk->key, &loan, &delta);
  {
    absl::MutexLock lock(&chunk->mu);
    answering.replicas->Return(chunk, built, &loan);
  }
  if (!built) {
    // Finite weights always compress; the replica is freed, so the worker's
    // next pull gets dense weights and a new one.
    return absl::InternalError(absl::StrFormat(
        "chunk %d: the delta for worker %d could not be compressed", chunk->key,
        request.worker_id()));
  }
  out->set_is_delta(true);
  status = EncodeChunk(delta, out->mutable_data());
  TrimScratch(&delta.values);
  TrimScratch(&delta.indices);
  return status;
}

// Bytes per value of the answers to `request`: deltas go out against the
// dense shadow at fp32, and means whole at fp32 at most; dense answers in
// the asked precision.
size_t AnswerValueBytes(const ShardConfig& config,
                        const v1::PullRequest& request) {
  return config.pull_compressor != nullptr || config.answers_means()
             ? BytesPerValue(ValuePrecision::kFp32)
             : BytesPerValue(FromWire(request.dense_value_type())
                                 .value_or(ValuePrecision::kFp32));
}

// The estimated size of the answer to the first `count` chunks of
// `request`, whose chunks are all in `chunks`: each chunk dense, plus
// overhead.
uint64_t EstimateAnswerBytes(const ChunkMap& chunks,
                             const v1::PullRequest& request, int count,
                             size_t value_bytes) {
  uint64_t estimate = 0;
  for (int i = 0; i < count; ++i) {
    estimate += chunks.at(request.chunks(i).key())->numel * value_bytes +
                kChunkAnswerOverheadBytes;
  }
  return estimate;
}

// How many leading chunks of `request` an answer of at most `limit`
// estimated bytes holds: all of them or none without allow_partial, the
// longest prefix with it (0 when even the first does not fit).
int ChunksThatFit(const ChunkMap& chunks, const v1::PullRequest& request,
                  size_t value_bytes, uint64_t limit) {
  uint64_t estimate = 0;
  for (int i = 0; i < request.chunks_size(); ++i) {
    estimate += chunks.at(request.chunks(i).key())->numel * value_bytes +
                kChunkAnswerOverheadBytes;
    if (estimate > limit) return request.allow_partial() ? i : 0;
  }
  return request.chunks_size();
}

// RESOURCE_EXHAUSTED for an answer of `bytes` over `limit`.
absl::Status TooLarge(uint64_t bytes, uint64_t limit) {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "pull answer of %d bytes would exceed the shard's max message size of "
      "%d bytes (--max-message-bytes): pull fewer chunks per request",
      bytes, limit));
}

// What a pull must get right before its chunks are looked at; `config` is
// null before Init.
absl::Status CheckPuller(const ShardConfig* config,
                         const v1::PullRequest& request) {
  if (config == nullptr) {
    return absl::FailedPreconditionError(
        "shard is not initialised: Init first");
  }
  if (request.worker_id() >= config->num_workers) {
    return absl::OutOfRangeError(
        absl::StrFormat("worker id %d is outside [0, %d)", request.worker_id(),
                        config->num_workers));
  }
  if (request.dense_value_type() != v1::VALUE_TYPE_UNSPECIFIED &&
      !FromWire(request.dense_value_type())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown dense value type %d",
                        static_cast<int>(request.dense_value_type())));
  }
  return absl::OkStatus();
}

// Counts each chunk of an answered pull by how it was answered.
void CountPulledChunks(const v1::PullResponse& response,
                       ShardMetrics* metrics) {
  for (const v1::ChunkWeights& answer : response.chunks()) {
    metrics->CountPulledChunk(!answer.is_delta()        ? PullAnswer::kDense
                              : answer.chain_size() > 0 ? PullAnswer::kChain
                                                        : PullAnswer::kDelta);
  }
}

}  // namespace

absl::Status Shard::Pull(const v1::PullRequest& request, absl::Time deadline,
                         v1::PullResponse* response, absl::Duration* waited) {
  // config_ may be read only once initialized() said so.
  if (absl::Status s =
          CheckPuller(initialized() ? config_.get() : nullptr, request);
      !s.ok()) {
    return s;
  }
  int answered = 0;
  if (absl::Status s = CheckPulledChunks(request, &answered); !s.ok()) {
    return s;
  }
  if (absl::Status s = AwaitSteps(request, answered, deadline, waited);
      !s.ok()) {
    return s;
  }
  // Held until the answer is returned: the service reserves its
  // serialized copy itself.
  absl::StatusOr<MemoryLease> lease = memory_budget_.Reserve(
      EstimateAnswerBytes(chunks_, request, answered,
                          AnswerValueBytes(*config_, request)),
      "pull answer");
  if (!lease.ok()) return lease.status();
  response->set_history_epoch(history_epoch_);
  response->set_partial(answered < request.chunks_size());
  PullAnswering answering;
  answering.compressor = config_->pull_compressor.get();
  answering.means = config_->answers_means();
  if (answering.compressor != nullptr && config_->per_worker_deltas) {
    answering.replicas = &replicas_;
  }
  uint64_t answer_bytes = 0;
  for (int i = 0; i < answered; ++i) {
    const v1::ChunkPull& pull = request.chunks(i);
    v1::ChunkWeights* out = response->add_chunks();
    answering.same_history = pull.have_epoch() == history_epoch_;
    absl::Status s =
        PullOne(FindChunk(pull.key()), pull, request, answering, out);
    // A delta may encode larger than its dense size: the estimate bounds
    // what is built, this bounds what is answered.
    if (s.ok()) answer_bytes += out->ByteSizeLong();
    if (s.ok() && answer_bytes > options_.max_message_bytes) {
      s = TooLarge(answer_bytes, options_.max_message_bytes);
    }
    // A delta larger than its dense size: the lease covers what was built.
    if (s.ok() && answer_bytes > lease->bytes()) {
      s = lease->Grow(answer_bytes - lease->bytes(), "pull answer");
    }
    if (!s.ok()) {
      response->Clear();
      return s;
    }
  }
  CountPulledChunks(*response, metrics_);
  return absl::OkStatus();
}

absl::Status Shard::AwaitSteps(const v1::PullRequest& request, int count,
                               absl::Time deadline,
                               absl::Duration* waited) const {
  for (int i = 0; i < count; ++i) {
    const v1::ChunkPull& pull = request.chunks(i);
    if (absl::Status s =
            AwaitStep(FindChunk(pull.key()), pull.min_step(), deadline, waited);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckPulledChunks(const v1::PullRequest& request,
                                      int* answered) const {
  if (static_cast<uint64_t>(request.chunks_size()) > chunks_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pull names %d chunks; shard %d owns %d", request.chunks_size(),
        options_.shard_id, chunks_.size()));
  }
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(request.chunks_size());
  for (const v1::ChunkPull& pull : request.chunks()) {
    const ChunkState* chunk = FindChunk(pull.key());
    if (chunk == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "chunk %d is not owned by shard %d", pull.key(), options_.shard_id));
    }
    if (!seen.insert(pull.key()).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d appears twice in one pull", pull.key()));
    }
  }
  const size_t value_bytes = AnswerValueBytes(*config_, request);
  *answered =
      ChunksThatFit(chunks_, request, value_bytes, options_.max_message_bytes);
  // An empty pull answers nothing, whatever allow_partial says.
  if (*answered == 0 && request.chunks_size() > 0) {
    return TooLarge(
        EstimateAnswerBytes(chunks_, request,
                            request.allow_partial() ? 1 : request.chunks_size(),
                            value_bytes),
        options_.max_message_bytes);
  }
  return absl::OkStatus();
}

}  // namespace gradwire
