// What this worker's pushes would have cost without compression: the
// serialized size of the same pushes carrying every chunk dense fp32. It is
// the baseline of SyncStats::dense_equivalent_bytes and of the
// gradwire_worker_dense_equivalent_bytes_total metric, against which the
// compression ratio is reported.
//
// Each chunk's dense message is built once, at construction, and only its
// size kept (a dense fp32 payload's size does not depend on the values):
// keeping the messages would cost 4 bytes per parameter for as long as the
// worker runs. A step's bytes are then each shard's request header, with
// the step's number (whose varint size is part of the request), plus the
// sizes of its chunks: exactly the serialized size of the dense requests.
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
  struct ShardBytes {
    v1::PushRequest header;    // worker_id and step; no chunks.
    uint64_t chunk_bytes = 0;  // What its dense chunks add to the header.
    uint64_t chunks = 0;
  };
  std::vector<ShardBytes> shards_;  // Per shard id.
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_DENSE_EQUIVALENT_H_
