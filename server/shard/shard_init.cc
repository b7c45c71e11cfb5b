// Shard::Init: the first valid Init with values installs config and chunks;
// a later one is compared with it (and may put a dropped worker back into
// the live set). An Init without values on an uninitialised shard only
// takes part in the election of the worker that sends them
// (init_election.h).
#include <cstring>
#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/shard/init_answer.h"
#include "server/shard/init_budget.h"
#include "server/shard/shard.h"

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
  // The shared shadow of the published pull deltas (published_deltas.h).
  if (config.shared_deltas()) state.shadow = state.weights;
  return std::make_unique<ChunkState>(std::move(state));
}

// The chunks `request` declares. The budget is checked before anything is
// allocated: a few bytes per declared chunk would otherwise buy a
// ChunkState and num_workers progress entries each.
absl::StatusOr<ChunkMap> NewChunks(const v1::InitRequest& request,
                                   const ShardConfig& config,
                                   const ShardOptions& options) {
  if (absl::Status s = CheckInitBudget(request, config.num_workers, options);
      !s.ok()) {
    return s;
  }
  ChunkMap chunks;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    auto chunk = NewChunk(declaration, config, options.max_chunk_numel);
    if (!chunk.ok()) return chunk.status();
    if (!chunks.emplace(declaration.key(), std::move(*chunk)).second) {
      return Invalid("chunk %d is declared twice", declaration.key());
    }
  }
  return chunks;
}

// What every Init must get right whether it is the first or not.
absl::Status CheckInitIdentity(const v1::InitRequest& request,
                               const ShardConfig& config, uint32_t shard_id) {
  if (request.shard_id() != shard_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("Init is addressed to shard %d but this is shard %d",
                        request.shard_id(), shard_id));
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

// A later Init against the accepted one: config, chunk keys and numel.
absl::Status CompareWithAccepted(const v1::InitRequest& request,
                                 const ShardConfig& config,
                                 const ChunkMap& chunks) {
  std::string difference;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&difference);
  if (!differ.Compare(config.proto, request.config())) {
    return absl::FailedPreconditionError(
        "Init conflicts with the accepted training config: " + difference);
  }
  if (static_cast<size_t>(request.chunks_size()) != chunks.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Init declares %d chunks but the accepted Init declared %d",
        request.chunks_size(), chunks.size()));
  }
  absl::flat_hash_set<uint64_t> seen;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    // With as many declarations as accepted chunks, a repeated key would
    // hide a missing one.
    if (!seen.insert(declaration.key()).second) {
      return Invalid("chunk %d is declared twice", declaration.key());
    }
    const auto it = chunks.find(declaration.key());
    if (it == chunks.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Init declares chunk %d, which the accepted Init did not",
          declaration.key()));
    }
    if (it->second->numel != declaration.initial().numel()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Init declares chunk %d with numel %d but the accepted Init had %d",
          declaration.key(), declaration.initial().numel(), it->second->numel));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Shard::Init(const v1::InitRequest& request,
                         v1::InitResponse* response) {
  return Init(request, response, absl::Now());
}

absl::Status Shard::Init(const v1::InitRequest& request,
                         v1::InitResponse* response, absl::Time now) {
  uint64_t ticket = 0;
  absl::Status status = InitLocked(request, now, response, &ticket);
  // An Init without values on an uninitialised shard joins nothing yet.
  const bool joined = !response->send_values() && !response->values_pending();
  if (status.ok() && joined && !response->initialized_now()) {
    RejoinByInit(request, &ticket);
  }
  if (ticket != 0) journal_->WaitDurable(ticket);
  return status;
}

absl::Status Shard::InitLocked(const v1::InitRequest& request, absl::Time now,
                               v1::InitResponse* response,
                               uint64_t* journal_ticket) {
  absl::MutexLock lock(&init_mu_);
  if (initialized()) {
    if (absl::Status s =
            CheckInitIdentity(request, *config_, options_.shard_id);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CompareWithAccepted(request, *config_, chunks_);
        !s.ok()) {
      return s;
    }
    response->set_initialized_now(false);
  } else if (request.values_omitted()) {
    return ElectValuesProvider(request, now, response);
  } else {
    auto config = ShardConfig::FromProto(request.config(), options_);
    if (!config.ok()) return config.status();
    auto chunks = NewChunks(request, **config, options_);
    if (!chunks.ok()) return chunks.status();
    if (absl::Status s =
            CheckInitIdentity(request, **config, options_.shard_id);
        !s.ok()) {
      return s;
    }
    Install(*std::move(config), *std::move(chunks));
    election_.Close();
    response->set_initialized_now(true);
    if (journal_ != nullptr) {
      *journal_ticket = journal_->Append(JournalRecordType::kInit,
                                         request.SerializeAsString());
      NoteJournaled(*journal_ticket);
    }
  }
  FillInitAnswer(request, *config_, chunks_, history_epoch_, response);
  return absl::OkStatus();
}

absl::Status Shard::ElectValuesProvider(const v1::InitRequest& request,
                                        absl::Time now,
                                        v1::InitResponse* response) {
  // Refused here for what the Init with values would be refused for, so
  // that a bad request is not elected to send them.
  auto config = ShardConfig::FromProto(request.config(), options_);
  if (!config.ok()) return config.status();
  if (absl::Status s = CheckInitIdentity(request, **config, options_.shard_id);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckInitBudget(request, (*config)->num_workers, options_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckValuelessDeclarations(request, options_.max_chunk_numel);
      !s.ok()) {
    return s;
  }
  // Shard s prefers worker s % num_workers: the values of a job's shards
  // then come over as many workers' links as there can be.
  const uint32_t preferred = options_.shard_id % (*config)->num_workers;
  const InitElection::Verdict verdict =
      election_.Offer(request.worker_id(), preferred, now);
  if (verdict.send_values) {
    response->set_send_values(true);
  } else {
    response->set_values_pending(true);
    response->set_values_provider(verdict.provider);
    response->set_retry_after_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(verdict.retry_after)));
  }
  return absl::OkStatus();
}

}  // namespace gradwire
