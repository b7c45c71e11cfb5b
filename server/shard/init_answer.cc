#include "server/shard/init_answer.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/codec/chunk_fingerprint.h"

namespace gradwire {

void FillInitAnswer(const v1::InitRequest& request, const ShardConfig& config,
                    const ChunkMap& chunks, uint64_t history_epoch,
                    v1::InitResponse* response) {
  // A per-worker replica starts with the worker's first pull: a worker that
  // skipped it would get a dense answer at its first step instead.
  const bool fingerprints =
      config.pull_compressor == nullptr || config.shared_deltas();
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    ChunkState& chunk = *chunks.at(declaration.key());
    absl::MutexLock lock(&chunk.mu);
    // Read through chunk.state: clang's analysis does not follow a const
    // reference to a guarded field.
    ChunkSnapshot& state = chunk.state;
    response->add_versions(state.version);
    response->add_next_steps(state.workers[request.worker_id()].next_step);
    if (!fingerprints) continue;
    // What a pull without a held version answers (shard_pull.cc), hashed
    // once per version (ChunkState::answer_fingerprint).
    const bool shadow = config.shared_deltas();
    const uint64_t version = shadow ? chunk.published.version() : state.version;
    if (chunk.answer_fingerprint_version != version) {
      chunk.answer_fingerprint =
          ChunkFingerprint(shadow ? state.shadow : state.weights);
      chunk.answer_fingerprint_version = version;
    }
    response->add_fingerprints(chunk.answer_fingerprint);
    response->add_fingerprint_versions(version);
  }
  if (fingerprints) response->set_history_epoch(history_epoch);
}

absl::Status CheckValuelessDeclarations(const v1::InitRequest& request,
                                        uint64_t max_numel) {
  absl::flat_hash_set<uint64_t> seen;
  for (const v1::ChunkDeclaration& declaration : request.chunks()) {
    const uint64_t key = declaration.key();
    const v1::ChunkData& initial = declaration.initial();
    if (initial.numel() == 0 || initial.numel() > max_numel) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d: numel %d is outside [1, %d]", key,
                          initial.numel(), max_numel));
    }
    if (initial.payload_case() != v1::ChunkData::PAYLOAD_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d carries initial values but the Init says values_omitted",
          key));
    }
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d is declared twice", key));
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire
