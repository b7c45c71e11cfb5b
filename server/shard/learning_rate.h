// The learning-rate schedule of a shard's optimizer: the rate of each update
// of a chunk, from the chunk's own update count, so that chunks updated at
// different times each follow the schedule.
#ifndef GRADWIRE_SERVER_SHARD_LEARNING_RATE_H_
#define GRADWIRE_SERVER_SHARD_LEARNING_RATE_H_

#include <cstdint>

#include "server/shard/optimizer_settings.h"

namespace gradwire {

// Learning rate of the update with 0-based index `update` (the number of
// updates already applied to the chunk). During warm-up (update <
// warmup_updates) it is learning_rate * (update + 1) / warmup_updates; after
// it, the schedule is applied to u = update - warmup_updates. Precondition:
// `settings` is valid. Computed in double, as PyTorch's schedulers do.
double LearningRateAt(const OptimizerSettings& settings, uint64_t update);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_LEARNING_RATE_H_
