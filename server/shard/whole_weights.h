// Whole weights of a chunk as a pull answers them (shard_pull.cc): dense
// in a precision, or, under optimizer MEAN, the step's mean exactly, its
// nonzero elements at fp32 where that is smaller than dense. Internal to
// server/shard/.
#ifndef GRADWIRE_SERVER_SHARD_WHOLE_WEIGHTS_H_
#define GRADWIRE_SERVER_SHARD_WHOLE_WEIGHTS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/precision.h"
#include "gradwire/v1/chunk.pb.h"

namespace gradwire {

// `weights` dense, rounded to `precision`, encoded into `*out`.
absl::Status EncodeDense(absl::Span<const float> weights,
                         ValuePrecision precision, v1::ChunkData* out);

// The weights of a chunk under optimizer MEAN (the last step's mean,
// ShardConfig::answers_means), whole and exact: their nonzero elements at
// fp32 where that is smaller than dense (the mean of sparse pushes holds at
// most W times their elements), else dense. Both decode to the same
// values, up to the sign of a zero.
absl::Status EncodeMean(absl::Span<const float> weights, v1::ChunkData* out);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_WHOLE_WEIGHTS_H_
