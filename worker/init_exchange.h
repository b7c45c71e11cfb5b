// A worker's Init of every shard at Register, sending its initial values
// only where they are needed (the Init protocol of docs/architecture.md):
//
//   1. Every shard gets an Init without values: each chunk's numel and
//      fingerprint (InitValues::kOmitted).
//   2. A shard that answers send_values (this worker was elected to provide
//      them) gets the Init again with values. A shard that answers
//      values_pending (another worker is sending them) is asked again after
//      its retry_after_ms, until it has them or `values_wait` has passed.
//   3. Each chunk whose fingerprint in the shard's answer equals this
//      worker's own is marked as held, at the answered version and history
//      epoch, in the plan; the others are marked as held at no version and
//      returned, to be pulled dense as before.
//
// A job of workers started from the same seed thus sends one copy of the
// weights per shard and pulls none back; a worker started differently (or
// from a shard that resumed from a checkpoint) pulls what differs.
//
// Thread safety: not thread-safe; Register calls it once, on the training
// thread.
#ifndef GRADWIRE_WORKER_INIT_EXCHANGE_H_
#define GRADWIRE_WORKER_INIT_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/chunk_plan.h"

namespace gradwire {

struct InitExchange {
  // Every shard's accepted answer (index = shard id; an empty one for a
  // shard that owns no chunk).
  std::vector<v1::InitResponse> responses;
  // Keys of the chunks whose values differ from the shard's, ascending.
  std::vector<uint64_t> keys_to_pull;
  // Shards this worker sent values to.
  uint32_t shards_sent_values = 0;
};

// Runs steps 1 to 3 above through `client` for `plan` (whose slots' versions
// and epochs it sets) as `worker_id` with `config`. Errors: the client's
// (a refused Init keeps the shard's code and message), BuildInitRequests',
// DEADLINE_EXCEEDED naming the shard and the worker it waited for when
// values were still pending after `values_wait`.
absl::StatusOr<InitExchange> ExchangeInit(PsClient* client, ChunkPlan* plan,
                                          const v1::TrainingConfig& config,
                                          uint32_t worker_id,
                                          absl::Duration values_wait);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_INIT_EXCHANGE_H_
