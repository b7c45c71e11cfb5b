// The Init requests of every shard at Register: each shard gets the
// training config and the declaration (key, tensor name, offset, numel and
// fingerprint) of every chunk it owns, with the chunks' initial values or
// without them (init_exchange.h sends values only to a shard that asks).
// The shards keep the first values they get and answer with the step each
// worker has pushed up to, where a restarted worker resumes.
//
// Thread safety: pure functions (BuildInitRequests reads the tensors).
#ifndef GRADWIRE_WORKER_INIT_REQUESTS_H_
#define GRADWIRE_WORKER_INIT_REQUESTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"

namespace gradwire {

// Whether Init requests carry the chunks' values.
enum class InitValues {
  // Dense fp32 values in each declaration's `initial`.
  kSent,
  // Only `initial.numel`, and InitRequest.values_omitted set.
  kOmitted,
};

// One request per shard (index = shard id) from `worker_id`, each with
// `config` and the chunks of `plan` the shard owns, each declaration with
// the ChunkFingerprint of the chunk's current values
// (common/codec/chunk_fingerprint.h) and, with InitValues::kSent, the
// values encoded dense fp32 (CUDA tensors are copied to the host first).
// The declarations of a shard are in the same order for both kinds.
// Errors: INTERNAL for a libtorch failure ("gradwire register: ..."), the
// codec's.
absl::StatusOr<std::vector<v1::InitRequest>> BuildInitRequests(
    const ChunkPlan& plan, const v1::TrainingConfig& config, uint32_t worker_id,
    InitValues values = InitValues::kSent);

// The step to resume at: the smallest next step the shards recorded for
// this worker, 0 when none did (a fresh job).
uint64_t ResumeStep(const std::vector<v1::InitResponse>& responses);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_INIT_REQUESTS_H_
