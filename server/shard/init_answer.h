// The parts of Shard::Init that read or check declarations without
// installing anything (internal to server/shard/): the answer to an
// accepted Init, and the checks of an Init that carries no values.
//
// Thread safety: pure functions of their arguments; FillInitAnswer takes
// each chunk's lock in turn while it reads it.
#ifndef GRADWIRE_SERVER_SHARD_INIT_ANSWER_H_
#define GRADWIRE_SERVER_SHARD_INIT_ANSWER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/chunk_state.h"
#include "server/shard/shard_config.h"

namespace gradwire {

// Fills, in the order of `request`'s declarations (each of which must be
// in `chunks`): versions, the worker's next_steps and, unless the config
// answers pulls from per-worker replicas (a pull must then register the
// worker), each chunk's fingerprint of what a dense pull from a worker
// holding nothing answers (the shared shadow with shared pull deltas, else
// the weights, both at fp32), that answer's version, and `history_epoch`.
// Hashing costs about 1 ns per byte of the declared chunks, once per
// version of each chunk (ChunkState::answer_fingerprint): Inits repeated
// between two updates cost O(chunks).
void FillInitAnswer(const v1::InitRequest& request, const ShardConfig& config,
                    const ChunkMap& chunks, uint64_t history_epoch,
                    v1::InitResponse* response);

// INVALID_ARGUMENT naming the chunk for a declaration of an Init with
// values_omitted that an Init with values would have been refused for
// (numel outside [1, max_numel], a repeated key) or that carries values
// anyway.
absl::Status CheckValuelessDeclarations(const v1::InitRequest& request,
                                        uint64_t max_numel);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_INIT_ANSWER_H_
