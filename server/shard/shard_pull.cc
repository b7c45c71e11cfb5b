// Shard::Pull: wait for the asked step, then answer dense or delta.
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "server/shard/shard.h"

namespace gradwire {
namespace {

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

// Dense weights in `precision`, encoded into `*out`.
absl::Status EncodeDense(absl::Span<const float> weights,
                         ValuePrecision precision, v1::ChunkData* out) {
  thread_local CompressedChunk dense;
  dense.Clear();
  dense.encoding = Encoding::kDense;
  dense.numel = weights.size();
  dense.precision = precision;
  dense.values.assign(weights.begin(), weights.end());
  RoundAllToPrecision(dense.values.data(), dense.values.size(), precision);
  return EncodeChunk(dense, out);
}

// Answers one chunk of a pull once its clock reached the asked step: an
// empty or one-version delta when the worker can take it, dense weights
// otherwise. `deltas`: the shard runs a pull compressor.
absl::Status PullOne(ChunkState* chunk, const v1::ChunkPull& pull,
                     const v1::PullRequest& request, bool deltas,
                     absl::Time deadline, v1::ChunkWeights* out,
                     absl::Duration* waited) {
  absl::MutexLock lock(&chunk->mu);
  if (absl::Status s = AwaitClock(chunk, pull.min_step(), deadline, waited);
      !s.ok()) {
    return s;
  }
  // Read through chunk->state: clang's analysis does not follow a const
  // reference to a guarded field.
  ChunkSnapshot& state = chunk->state;
  out->set_key(chunk->key);
  out->set_version(state.version);
  out->set_clock(state.clock);
  if (deltas && request.allow_delta() && state.version > 0 &&
      pull.have_version() == state.version) {
    // Already current: an empty delta costs a few bytes instead of the chunk.
    out->set_is_delta(true);
    out->mutable_data()->set_numel(chunk->numel);
    v1::SparseValues* none = out->mutable_data()->mutable_sparse();
    none->set_value_type(v1::VALUE_TYPE_FP32);
    return absl::OkStatus();
  }
  if (deltas && request.allow_delta() &&
      chunk->delta_version == state.version && state.version > 0 &&
      pull.have_version() + 1 == state.version) {
    out->set_is_delta(true);
    return EncodeChunk(chunk->delta, out->mutable_data());
  }
  out->set_is_delta(false);
  if (deltas) {
    // Workers on deltas must hold exactly the shadow, so it goes out at full
    // precision.
    return EncodeDense(state.shadow, ValuePrecision::kFp32,
                       out->mutable_data());
  }
  const ValuePrecision precision =
      FromWire(request.dense_value_type()).value_or(ValuePrecision::kFp32);
  return EncodeDense(state.weights, precision, out->mutable_data());
}

}  // namespace

absl::Status Shard::Pull(const v1::PullRequest& request, absl::Time deadline,
                         v1::PullResponse* response, absl::Duration* waited) {
  if (!initialized()) {
    return absl::FailedPreconditionError(
        "shard is not initialised: Init first");
  }
  if (request.worker_id() >= config_->num_workers) {
    return absl::OutOfRangeError(
        absl::StrFormat("worker id %d is outside [0, %d)", request.worker_id(),
                        config_->num_workers));
  }
  if (request.dense_value_type() != v1::VALUE_TYPE_UNSPECIFIED &&
      !FromWire(request.dense_value_type())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown dense value type %d",
                        static_cast<int>(request.dense_value_type())));
  }
  for (const v1::ChunkPull& pull : request.chunks()) {
    if (FindChunk(pull.key()) == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "chunk %d is not owned by shard %d", pull.key(), options_.shard_id));
    }
  }
  for (const v1::ChunkPull& pull : request.chunks()) {
    if (absl::Status s = PullOne(FindChunk(pull.key()), pull, request,
                                 config_->pull_compressor != nullptr, deadline,
                                 response->add_chunks(), waited);
        !s.ok()) {
      response->Clear();
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire
