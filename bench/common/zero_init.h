#ifndef GRADWIRE_BENCH_COMMON_ZERO_INIT_H_
#define GRADWIRE_BENCH_COMMON_ZERO_INIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/partition/partition.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

// Fills `*init` (which should be empty) with the Init that worker 0 sends to
// `shard`: `config`, and every chunk `partition` places on that shard,
// declared as part of `tensor_name` with all-zero dense initial weights. The
// server and load benchmarks start their shards with it, so both measure
// the same starting state. An encoding error is returned as is.
absl::Status BuildZeroInit(const v1::TrainingConfig& config,
                           const Partition& partition, uint32_t shard,
                           const std::string& tensor_name,
                           v1::InitRequest* init);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMMON_ZERO_INIT_H_
