// The last move of a step with local ranks: each local rank pulled only the
// chunks it handles (ChunkPlan::OwnsLocally), so every rank broadcasts
// those to the others, and every process of the node ends the step with the
// same weights. One flat buffer per rank, on the parameters' device (Gloo
// for CPU, NCCL for CUDA tensors).
//
// Thread safety: a collective; every local rank calls it at the same point
// of the same step, from the thread that drives its LocalGroup.
#ifndef GRADWIRE_WORKER_NODE_BROADCAST_H_
#define GRADWIRE_WORKER_NODE_BROADCAST_H_

#include <vector>

#include "absl/status/status.h"
#include "worker/chunk_plan.h"
#include "worker/local_group.h"

namespace gradwire {

// Copies every chunk of `plan` from the local rank that handles it into the
// parameters of every other rank of `group`; with `carried` (one flag per
// registered tensor, the same on every rank), only the chunks of the
// tensors flagged, the others being unchanged by the step. Nothing to do
// (OK) when the group has one rank. Errors: the group's (a broken group
// stays broken). Throws as libtorch does.
absl::Status ShareInsideNode(LocalGroup& group, const ChunkPlan& plan,
                             const std::vector<bool>& carried = {});

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_NODE_BROADCAST_H_
