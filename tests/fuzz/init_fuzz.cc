// libFuzzer target for Shard::Init, end to end: config validation, chunk
// declarations, the first Init installing state, and later Inits compared
// with the accepted one.
//
// Input (shard_fuzz_util.h): a setup byte, then records, by op byte % 3:
//   0  a length-prefixed serialized v1::InitRequest;
//   1  the reference Init (MakeInit of the setup's config) from the worker
//      in the next byte;
//   2  the reference Init with one conflict, chosen by the next byte.
// Setup byte: bit 0 starts the fresh shard with --num-workers=2, bit 1
// with --mode=bsp; the bits above are the ShardSetup of the reference
// config. Every record goes to two shards: one that starts fresh (and is
// initialised by the first Init it accepts) and one initialised with the
// reference Init before the first record. Both cap chunks at
// kMaxChunkNumel elements and the Init budget at kMaxChunks chunks and
// kMaxInitOverheadBytes, so no numel or worker-count claim allocates much.
//
// Checked for every Init, whatever the input:
//   - a refused Init changes nothing (digest, initialised or not) and says
//     why; once initialised, an Init addressed to this shard by a worker of
//     the job that declares chunks but another config is
//     FAILED_PRECONDITION;
//   - an accepted Init on an initialised shard changes nothing, is not
//     `initialized_now`, and has the accepted config and chunks;
//   - a part of an Init in parts (values_parts > 1) is refused (ABORTED
//     among the codes, for a part out of sequence), collected (answered
//     values_parts_received, nothing installed), told to wait for another
//     worker's parts (values_pending), or, as the last part, installs what
//     the parts since the last part 0 declared; on an initialised shard it
//     is acknowledged as complete and changes nothing;
//   - the first accepted Init installs exactly its chunks with its initial
//     weights at version 0, within the shard's limit of chunks x workers;
//     then the same Init again is acknowledged, one
//     with another learning rate is FAILED_PRECONDITION, and a
//     Snapshot/Restore round trip keeps the digest.
// Any violation aborts through __builtin_trap.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "common/codec/codec.h"
#include "google/protobuf/util/message_differencer.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/init_budget.h"
#include "server/shard/init_parts.h"
#include "server/shard/shard.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

using google::protobuf::util::MessageDifferencer;

// The reference Init with one difference, chosen by `which`.
v1::InitRequest ConflictingInit(const v1::InitRequest& reference,
                                uint8_t which) {
  v1::InitRequest request = reference;
  v1::TrainingConfig* config = request.mutable_config();
  switch (which % 7) {
    case 0:
      config->mutable_optimizer()->set_learning_rate(kLearningRate * 2);
      break;
    case 1:
      config->set_num_workers(config->num_workers() + 1);
      break;
    case 2:
      config->set_mode(config->mode() == v1::CONSISTENCY_MODE_ASP
                           ? v1::CONSISTENCY_MODE_BSP
                           : v1::CONSISTENCY_MODE_ASP);
      break;
    case 3:
      config->set_model_fingerprint(config->model_fingerprint() + 1);
      break;
    case 4: {
      const std::vector<float> longer(kChunkNumels[0] + 1, 0.5f);
      *request.mutable_chunks(0)->mutable_initial() = DenseData(longer);
      break;
    }
    case 5:
      request.mutable_chunks()->RemoveLast();
      break;
    default: {
      v1::ChunkDeclaration* extra = request.add_chunks();
      extra->set_key(kForeignKey);
      *extra->mutable_initial() = DenseData(GradientValues(2, which));
      break;
    }
  }
  return request;
}

// Keys and element counts an Init declares.
std::map<uint64_t, uint64_t> DeclaredChunks(const v1::InitRequest& request) {
  std::map<uint64_t, uint64_t> chunks;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    chunks[declaration.key()] = declaration.initial().numel();
  }
  return chunks;
}

class CheckedShard {
 public:
  explicit CheckedShard(const ShardOptions& options)
      : options_(options), shard_(std::make_unique<Shard>(options)) {}

  void Init(const v1::InitRequest& request) {
    const uint64_t before = shard_->StateDigest();
    const bool was_initialized = shard_->initialized();
    v1::InitResponse response;
    const absl::Status status = shard_->Init(request, &response);
    if (Verbose()) {
      std::fprintf(stderr, "%s shard: init worker %u, %d chunks: %s%s\n",
                   was_initialized ? "initialised" : "uninitialised",
                   request.worker_id(), request.chunks_size(),
                   status.ToString().c_str(),
                   response.initialized_now() ? " (initialised now)" : "");
    }
    if (!status.ok()) {
      Check(shard_->StateDigest() == before);
      Check(shard_->initialized() == was_initialized);
      // RESOURCE_EXHAUSTED: a well-formed Init over the shard's budget.
      Check(absl::IsInvalidArgument(status) ||
            absl::IsFailedPrecondition(status) || absl::IsOutOfRange(status) ||
            absl::IsResourceExhausted(status) ||
            (absl::IsAborted(status) && InitParts::IsPart(request)));
      Check(!status.message().empty());
      if (was_initialized && AddressedToThisJob(request) &&
          !MessageDifferencer::Equals(request.config(), accepted_->config())) {
        Check(absl::IsFailedPrecondition(status));
      }
      return;
    }
    if (response.send_values() || response.values_pending()) {
      // An Init without values before the shard has them only elects; a
      // part 0 may be told to wait for another worker's parts.
      Check(!was_initialized &&
            (request.values_omitted() || InitParts::IsPart(request)));
      Check(shard_->StateDigest() == before && !shard_->initialized());
      Check(response.versions_size() == 0);
      return;
    }
    if (InitParts::IsPart(request) && !request.values_omitted()) {
      if (!CheckPart(request, response, was_initialized, before)) return;
    } else {
      Check(response.values_parts_received() == 0);
    }
    Check(response.versions_size() == request.chunks_size());
    Check(response.next_steps_size() == request.chunks_size());
    if (InitParts::IsPart(request)) {
      // Installed by the last part: what the parts since part 0 declared.
      Check(!was_initialized && response.initialized_now());
      v1::InitRequest whole = request;
      whole.clear_values_part();
      whole.clear_values_parts();
      *whole.mutable_chunks() = parts_->chunks();
      for (const v1::ChunkDeclaration& chunk : request.chunks()) {
        *whole.add_chunks() = chunk;
      }
      parts_.reset();
      Check(shard_->initialized());
      accepted_ = whole;
      CheckInstalled(response);
      CheckSnapshotRoundTrip();
      return;
    }
    if (was_initialized) {
      Check(!response.initialized_now());
      Check(shard_->StateDigest() == before);
      Check(MessageDifferencer::Equals(request.config(), accepted_->config()));
      Check(DeclaredChunks(request) == DeclaredChunks(*accepted_));
      return;
    }
    Check(response.initialized_now());
    Check(shard_->initialized());
    accepted_ = request;
    CheckInstalled(response);
    CheckRepeatedInits();
    CheckSnapshotRoundTrip();
  }

 private:
  // An accepted part that did not install: false when Init has nothing
  // more to check. Keeps the declarations collected since part 0.
  bool CheckPart(const v1::InitRequest& part, const v1::InitResponse& response,
                 bool was_initialized, uint64_t before) {
    if (was_initialized) {
      // A late part: acknowledged as complete.
      Check(response.values_parts_received() == part.values_parts());
      Check(!response.initialized_now());
      Check(shard_->StateDigest() == before);
      return false;
    }
    if (response.initialized_now()) return true;  // The last part.
    Check(response.values_parts_received() == part.values_part() + 1);
    Check(!shard_->initialized() && shard_->StateDigest() == before);
    if (part.values_part() == 0) parts_ = part;
    Check(parts_.has_value());
    if (part.values_part() > 0) {
      for (const v1::ChunkDeclaration& chunk : part.chunks()) {
        *parts_->add_chunks() = chunk;
      }
    }
    return false;
  }

  // What CheckInitIdentity asks before comparing configs.
  bool AddressedToThisJob(const v1::InitRequest& request) const {
    return request.shard_id() == options_.shard_id &&
           request.worker_id() < accepted_->config().num_workers() &&
           request.chunks_size() > 0;
  }

  // Exactly the declared chunks, with their initial weights, at version 0.
  void CheckInstalled(const v1::InitResponse& response) const {
    for (int i = 0; i < response.versions_size(); ++i) {
      Check(response.versions(i) == 0 && response.next_steps(i) == 0);
    }
    Check(shard_->Info().num_chunks() ==
          static_cast<uint64_t>(accepted_->chunks_size()));
    // What the shard allocated for bookkeeping stays within its budget.
    Check(static_cast<uint64_t>(accepted_->chunks_size()) <=
          options_.max_chunks);
    Check(EstimateInitOverheadBytes(*accepted_,
                                    accepted_->config().num_workers()) <=
          options_.max_init_overhead_bytes);
    for (const v1::ChunkDeclaration& declaration : accepted_->chunks()) {
      const uint64_t numel = declaration.initial().numel();
      Check(numel >= 1 && numel <= options_.max_chunk_numel);
      DecodeOptions options;
      options.expected_numel = numel;
      CompressedChunk declared;
      Check(DecodeChunk(declaration.initial(), options, &declared).ok());

      v1::PullRequest pull;
      pull.set_worker_id(accepted_->worker_id());
      pull.add_chunks()->set_key(declaration.key());
      v1::PullResponse pulled;
      Check(shard_->Pull(pull, absl::InfinitePast(), &pulled).ok());
      Check(pulled.chunks_size() == 1 && pulled.chunks(0).version() == 0);
      CompressedChunk held;
      Check(DecodeChunk(pulled.chunks(0).data(), options, &held).ok());
      Check(held.values.size() == declared.values.size());
      Check(std::memcmp(held.values.data(), declared.values.data(),
                        numel * sizeof(float)) == 0);
    }
  }

  // The accepted Init again is acknowledged; another learning rate is not.
  void CheckRepeatedInits() const {
    const uint64_t digest = shard_->StateDigest();
    v1::InitResponse again;
    Check(shard_->Init(*accepted_, &again).ok());
    Check(!again.initialized_now());
    v1::InitRequest other = *accepted_;
    v1::OptimizerConfig* optimizer =
        other.mutable_config()->mutable_optimizer();
    optimizer->set_learning_rate(optimizer->learning_rate() == 0.25f ? 0.5f
                                                                     : 0.25f);
    v1::InitResponse refused;
    Check(absl::IsFailedPrecondition(shard_->Init(other, &refused)));
    Check(shard_->StateDigest() == digest);
  }

  void CheckSnapshotRoundTrip() const {
    auto snapshot = shard_->Snapshot();
    Check(snapshot.ok());
    Shard restored(options_);
    Check(restored.Restore(*std::move(snapshot)).ok());
    Check(restored.StateDigest() == shard_->StateDigest());
  }

  const ShardOptions options_;
  std::unique_ptr<Shard> shard_;
  std::optional<v1::InitRequest> accepted_;
  // The declarations of the parts collected since the last part 0.
  std::optional<v1::InitRequest> parts_;
};

}  // namespace
}  // namespace gradwire::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gradwire::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradwire::fuzz;
  InputReader input(data, size);
  const uint8_t setup = input.Byte();
  gradwire::ShardOptions fresh_options = MakeShardOptions();
  if (setup & 1) fresh_options.num_workers = 2;
  if (setup & 2) fresh_options.mode = gradwire::v1::CONSISTENCY_MODE_BSP;
  const gradwire::v1::InitRequest reference =
      MakeInit(MakeConfig(ShardSetup::FromByte(setup >> 2)), 0);

  CheckedShard fresh(fresh_options);
  CheckedShard initialized(MakeShardOptions());
  initialized.Init(reference);
  while (!input.empty()) {
    gradwire::v1::InitRequest request;
    switch (input.Byte() % 3) {
      case 0: {
        const absl::string_view bytes = input.Message();
        if (!request.ParseFromArray(bytes.data(),
                                    static_cast<int>(bytes.size()))) {
          continue;
        }
        break;
      }
      case 1:
        request = reference;
        request.set_worker_id(input.Byte() % 4);
        break;
      default:
        request = ConflictingInit(reference, input.Byte());
        break;
    }
    fresh.Init(request);
    initialized.Init(request);
  }
  return 0;
}
