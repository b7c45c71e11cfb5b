// The parts of an Init with values that travels in several messages
// (InitRequest.values_parts > 1), collected until the last one has arrived
// (internal to server/shard/).
//
// A shard's initial values are its part of the model and may be far larger
// than one gRPC message; the client splits them by chunk declaration
// (client/message_parts.h). One worker's collection is held at a time:
//   - Part 0 starts a collection, unless another worker's is in progress and
//     fresh (a part from it within the values timeout): that caller is told
//     to wait for it (values_pending), as the election tells a caller
//     without values. A stale collection (its sender died) is replaced.
//   - Every later part must continue the collection: the same worker, config
//     and part count, the next index, no chunk twice. One that does not is
//     ABORTED (send part 0 again), or FAILED_PRECONDITION for another
//     config.
//   - Nothing is journaled until the last part: the collection is then
//     journaled as parts of dense fp32 values rebuilt from the decoded
//     chunks (Records), one worker's parts in a row, so that a replay meets
//     only complete collections and never depends on timing.
//
// Thread safety: not thread-safe; the shard holds its Init lock around
// every call.
#ifndef GRADWIRE_SERVER_SHARD_INIT_PARTS_H_
#define GRADWIRE_SERVER_SHARD_INIT_PARTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/chunk_state.h"

namespace gradwire {

// Most parts one Init may come in: at the smallest message size the server
// accepts (1 KiB) a part still carries one chunk of 200 floats, so this
// bounds only nonsense.
inline constexpr uint32_t kMaxInitParts = uint32_t{1} << 20;

class InitParts {
 public:
  // Whether `request` is one part of several (values_parts > 1).
  static bool IsPart(const v1::InitRequest& request) {
    return request.values_parts() > 1;
  }

  // What a part must get right on its own: values (not values_omitted), a
  // part index below the count, a count of at most kMaxInitParts.
  // INVALID_ARGUMENT otherwise.
  static absl::Status CheckPart(const v1::InitRequest& part);

  // Whether a part 0 from `worker` at `now` must wait for the collection in
  // progress: another worker's, with a part within `fresh_for`.
  bool HeldByAnother(uint32_t worker, absl::Time now,
                     absl::Duration fresh_for) const {
    return received_ > 0 && worker != worker_ &&
           now - last_part_at_ < fresh_for;
  }
  // The worker whose collection is in progress (when received() > 0).
  uint32_t worker() const { return worker_; }

  // OK when `part` continues the collection (any part 0 does); ABORTED for
  // a part out of sequence, FAILED_PRECONDITION for another config, with
  // nothing changed.
  absl::Status CheckContinues(const v1::InitRequest& part) const;

  // Adds `part` (which CheckContinues accepted) with its decoded `chunks`
  // and its bookkeeping estimate, received at `now`; part 0 first drops
  // what was collected.
  // INVALID_ARGUMENT, with nothing changed, for a chunk an earlier part
  // declared.
  absl::Status Add(const v1::InitRequest& part, ChunkMap chunks,
                   uint64_t overhead_bytes, absl::Time now);

  // Parts collected, chunks and elements in them, and the sum of their
  // bookkeeping estimates (EstimateInitOverheadBytes, init_budget.h).
  uint32_t received() const { return received_; }
  uint64_t overhead_bytes() const { return overhead_bytes_; }
  uint64_t chunks() const { return chunks_.size(); }
  uint64_t elements() const { return elements_; }
  // Whether the last part has been added.
  bool complete() const { return parts_ > 1 && received_ == parts_; }

  // The complete collection as the Init parts a replay installs it from:
  // `last`'s worker, shard and config, the chunks in key order with their
  // dense fp32 values, each part at most about `max_bytes`. Call before
  // Take.
  std::vector<std::string> Records(const v1::InitRequest& last,
                                   uint64_t max_bytes) const;

  // The collected chunks; the collection is empty afterwards.
  ChunkMap Take();

 private:
  uint32_t worker_ = 0;
  uint32_t parts_ = 0;
  uint32_t received_ = 0;
  uint64_t elements_ = 0;
  uint64_t overhead_bytes_ = 0;
  absl::Time last_part_at_ = absl::InfinitePast();
  // The config of part 0, serialized, which every later part must repeat.
  std::string config_;
  ChunkMap chunks_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_INIT_PARTS_H_
