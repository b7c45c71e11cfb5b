// Shard::Init: the first valid Init with values (whole, or the last of its
// parts, init_parts.h) installs config and chunks; a later one is compared
// with it (and may put a dropped worker back into the live set). An Init
// without values on an uninitialised shard only takes part in the election of
// the worker that sends them (init_election.h).
#include <cstring>
#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "common/heap_tuning.h"
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
  state.live = LiveSet(config.num_workers);
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

// How soon a worker whose part 0 waits for another worker's parts asks
// again: parts arrive at link speed, a message every fraction of a second.
constexpr uint32_t kPartsPendingRetryMs = 200;

// A part of an Init in parts that arrives after the shard was installed
// (a retry, or a provider that lost the election late): acknowledged as
// complete when it is addressed and configured as the accepted Init, so
// that its sender goes on to the Init without values.
absl::Status AcknowledgeLatePart(const v1::InitRequest& part,
                                 const ShardConfig& config, uint32_t shard_id,
                                 v1::InitResponse* response) {
  if (absl::Status s = InitParts::CheckPart(part); !s.ok()) return s;
  if (absl::Status s = CheckInitIdentity(part, config, shard_id); !s.ok()) {
    return s;
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(config.proto,
                                                          part.config())) {
    return absl::FailedPreconditionError(
        "Init part conflicts with the accepted training config");
  }
  response->set_values_parts_received(part.values_parts());
  return absl::OkStatus();
}

// A part with the parts `held` before it (none for a part 0) stays within
// the limits of a whole Init: --max-chunks; the bookkeeping estimates
// together within --max-init-overhead-bytes (each part's counts the
// workers' presence again, which errs on the safe side); the model state
// within --memory-limit-bytes.
absl::Status CheckPartLimits(const v1::InitRequest& part,
                             const ShardConfig& config, const InitParts& held,
                             uint64_t part_overhead,
                             const ShardOptions& options) {
  const uint64_t chunks =
      held.chunks() + static_cast<uint64_t>(part.chunks_size());
  if (chunks > options.max_chunks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init part %d brings the declared chunks to %d but this shard "
        "accepts at most %d (--max-chunks)",
        part.values_part(), chunks, options.max_chunks));
  }
  const uint64_t overhead = held.overhead_bytes() + part_overhead;
  if (overhead > options.max_init_overhead_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init part %d brings the estimated bookkeeping of the parts to %d "
        "bytes beyond the model data, over this shard's limit of %d bytes "
        "(--max-init-overhead-bytes)",
        part.values_part(), overhead, options.max_init_overhead_bytes));
  }
  return CheckModelFits(config, held.elements() + DeclaredElements(part),
                        options);
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
  response->set_max_message_bytes(options_.max_message_bytes);
  // An Init without values on an uninitialised shard, and a part of an
  // Init in parts, join nothing yet.
  const bool joined = !response->send_values() && !response->values_pending() &&
                      response->values_parts_received() == 0;
  if (status.ok() && joined && !response->initialized_now()) {
    RejoinByInit(request, &ticket);
  }
  if (ticket != 0) journal_->WaitDurable(ticket);
  // The Init's decoded parts and journal records are gone.
  if (status.ok() && response->initialized_now()) ReleaseFreeHeapPages();
  return status;
}

absl::Status Shard::InitLocked(const v1::InitRequest& request, absl::Time now,
                               v1::InitResponse* response,
                               uint64_t* journal_ticket) {
  absl::MutexLock lock(&init_mu_);
  if (initialized() && InitParts::IsPart(request)) {
    return AcknowledgeLatePart(request, *config_, options_.shard_id, response);
  }
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
  } else if (InitParts::IsPart(request)) {
    if (absl::Status s = AddInitPart(request, now, response, journal_ticket);
        !s.ok() || !response->initialized_now()) {
      return s;
    }
  } else {
    auto config = ShardConfig::FromProto(request.config(), options_);
    if (!config.ok()) return config.status();
    if (absl::Status s =
            CheckModelFits(**config, DeclaredElements(request), options_);
        !s.ok()) {
      return s;
    }
    auto chunks = NewChunks(request, **config, options_);
    if (!chunks.ok()) return chunks.status();
    if (absl::Status s =
            CheckInitIdentity(request, **config, options_.shard_id);
        !s.ok()) {
      return s;
    }
    JournalInit(request, journal_ticket);
    Install(*std::move(config), *std::move(chunks));
    election_.Close();
    response->set_initialized_now(true);
  }
  FillInitAnswer(request, *config_, chunks_, history_epoch_, response);
  return absl::OkStatus();
}

void Shard::JournalInit(const v1::InitRequest& request,
                        uint64_t* journal_ticket) {
  if (journal_ == nullptr) return;
  *journal_ticket =
      journal_->Append(JournalRecordType::kInit, request.SerializeAsString());
  NoteJournaled(*journal_ticket);
}

absl::Status Shard::AddInitPart(const v1::InitRequest& part, absl::Time now,
                                v1::InitResponse* response,
                                uint64_t* journal_ticket) {
  if (absl::Status s = InitParts::CheckPart(part); !s.ok()) return s;
  auto config = ShardConfig::FromProto(part.config(), options_);
  if (!config.ok()) return config.status();
  if (absl::Status s = CheckInitIdentity(part, **config, options_.shard_id);
      !s.ok()) {
    return s;
  }
  // Part 0 starts over, unless another worker is sending its parts.
  const bool first = part.values_part() == 0;
  if (first && init_parts_.HeldByAnother(part.worker_id(), now,
                                         options_.init_values_timeout)) {
    response->set_values_pending(true);
    response->set_values_provider(init_parts_.worker());
    response->set_retry_after_ms(kPartsPendingRetryMs);
    return absl::OkStatus();
  }
  if (absl::Status s = init_parts_.CheckContinues(part); !s.ok()) return s;
  // Part 0 starts over: nothing held counts.
  static const InitParts* const kNothingHeld = new InitParts();
  const uint64_t part_overhead =
      EstimateInitOverheadBytes(part, (*config)->num_workers);
  if (absl::Status s =
          CheckPartLimits(part, **config, first ? *kNothingHeld : init_parts_,
                          part_overhead, options_);
      !s.ok()) {
    return s;
  }
  auto chunks = NewChunks(part, **config, options_);
  if (!chunks.ok()) return chunks.status();
  if (absl::Status s =
          init_parts_.Add(part, *std::move(chunks), part_overhead, now);
      !s.ok()) {
    return s;
  }
  if (!init_parts_.complete()) {
    election_.Extend(part.worker_id(), now);
    response->set_values_parts_received(init_parts_.received());
    return absl::OkStatus();
  }
  // Journaled only now, complete and in a row (init_parts.h), before the
  // shard counts as initialised.
  if (journal_ != nullptr) {
    for (std::string& record :
         init_parts_.Records(part, options_.max_message_bytes)) {
      *journal_ticket =
          journal_->Append(JournalRecordType::kInit, std::move(record));
      NoteJournaled(*journal_ticket);
    }
  }
  Install(*std::move(config), init_parts_.Take());
  election_.Close();
  response->set_initialized_now(true);
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
  // The valueless Init declares the whole model: a shard that cannot hold
  // it says so before anyone sends values.
  if (absl::Status s =
          CheckModelFits(**config, DeclaredElements(request), options_);
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
