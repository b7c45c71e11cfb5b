// What this worker's pushes would have cost without compression: the
// serialized size of the same pushes carrying every chunk dense fp32. It is
// the baseline of SyncStats::dense_equivalent_bytes and of the
// gradwire_worker_dense_equivalent_bytes_total metric, against which the
// compression ratio is reported.
//
// The requests are built once (zeros: a dense fp32 payload's size does not
// depend on the values) and re-measured with each step's number, whose
// varint size is part of the request.
//
// Thread safety: not thread-safe.
#ifndef GRADWIRE_WORKER_DENSE_EQUIVALENT_H_
#define GRADWIRE_WORKER_DENSE_EQUIVALENT_H_

#include <cstdint>
#include <vector>

#include "gradwire/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"

namespace gradwire {

class DenseEquivalent {
 public:
  // The dense pushes of the chunks of `plan` this local rank handles, from
  // `worker_id`.
  DenseEquivalent(const ChunkPlan& plan, uint32_t worker_id);

  // Bytes of step `step`'s dense pushes, over the shards that get any.
  uint64_t StepBytes(uint64_t step);

 private:
  std::vector<v1::PushRequest> requests_;  // Per shard.
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_DENSE_EQUIVALENT_H_
