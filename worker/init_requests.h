// The Init of every shard at Register: each shard gets the training config
// and the declaration (key, tensor name, offset) and initial values of
// every chunk it owns. The shards keep the first Init's values and answer
// with the step each worker has pushed up to, where a restarted worker
// resumes.
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

// One request per shard (index = shard id) from `worker_id`, each with
// `config` and the chunks of `plan` the shard owns, their current values
// encoded dense fp32 (CUDA tensors are copied to the host first). Errors:
// INTERNAL for a libtorch failure ("gradwire register: ..."), the codec's.
absl::StatusOr<std::vector<v1::InitRequest>> BuildInitRequests(
    const ChunkPlan& plan, const v1::TrainingConfig& config,
    uint32_t worker_id);

// The step to resume at: the smallest next step the shards recorded for
// this worker, 0 when none did (a fresh job).
uint64_t ResumeStep(const std::vector<v1::InitResponse>& responses);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_INIT_REQUESTS_H_
