// Pulls: what this worker asks the shards for, and how their answers land
// in the parameters.
//
// A worker pulls the chunks its local rank handles, each with the version
// it holds, the shard's history epoch that version counts in, and the
// smallest chunk clock the consistency mode lets it see
// (ConsistencyRule::MinStepToPull). A shard answers a chunk with a
// compressed delta from that version (added to the parameter in place; only
// when the epoch is the shard's own) or with dense weights (written over
// it); either way the chunk then holds the answered version of the
// answer's epoch.
//
// Thread safety: not thread-safe; the training thread calls these while no
// push of the chunks is in flight.
#ifndef GRADWIRE_WORKER_PULLED_WEIGHTS_H_
#define GRADWIRE_WORKER_PULLED_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"
#include "worker/cpu_account.h"

namespace gradwire {

// One request per shard (index = shard id) from `worker_id` for the chunks
// `keys` of `plan` (chunks this local rank handles), at the versions and
// history epochs their slots hold, waiting for clock `min_step`;
// `allow_delta` asks for compressed deltas. A shard none of `keys` lives on
// gets an empty request (skipped by the client).
std::vector<v1::PullRequest> BuildPullRequests(const ChunkPlan& plan,
                                               absl::Span<const uint64_t> keys,
                                               uint32_t worker_id,
                                               bool allow_delta,
                                               uint64_t min_step);

// Writes every chunk of `responses` into its parameter of `plan` (adds a
// delta, overwrites with dense weights; CUDA parameters through
// device_chunks.h) and moves its slot to the answered version and the
// answer's history epoch. Returns the smallest chunk clock answered
// (UINT64_MAX when none was). INTERNAL for a chunk the plan does not have
// or a delta from a version or history epoch the worker does not hold; the
// codec's errors, naming the chunk. On error the parameters
// may hold a mix of old and new chunks. Throws as libtorch does for CUDA
// parameters. Its decoding and writing count in `account` (when not
// null) as CpuActivity::kDecode and kCopy.
absl::StatusOr<uint64_t> ApplyPulledWeights(
    const std::vector<v1::PullResponse>& responses, ChunkPlan* plan,
    CpuAccount* account = nullptr);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_PULLED_WEIGHTS_H_
