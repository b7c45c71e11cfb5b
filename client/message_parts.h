// Requests too large for one gRPC message, split into several that each fit
// (internal to client/; GrpcPsClient uses them).
//
// A shard refuses any message over its --max-message-bytes, and a model's
// part on one shard may be many times that. What a client sends in bulk is
// split by chunk, which the protocol allows everywhere:
//   Init   the values travel as InitRequest parts (values_part of
//          values_parts), each with some of the chunk declarations; the
//          Init without values (WithoutValues) then brings the full answer.
//   Push   several pushes of the same step, each with some of the chunks:
//          the exactly-once key is per (worker, step, chunk).
// (A pull answer is split by the shard: PullRequest.allow_partial.)
//
// Sizes are protobuf sizes; `max_bytes` is the smaller of the client's and
// the shard's limits, and each part is kept kMessageMarginBytes under it
// for the encoding's framing. A single chunk declaration or gradient that
// does not fit is RESOURCE_EXHAUSTED naming it and the remedy (smaller
// chunks: the partition's chunk size). Pure functions; thread-safe.
#ifndef GRADWIRE_CLIENT_MESSAGE_PARTS_H_
#define GRADWIRE_CLIENT_MESSAGE_PARTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

inline constexpr uint64_t kMessageMarginBytes = 256;

// Where the parts of an Init begin: each part holds the declarations from
// its entry to the next one's (or the end). One entry, 0, when `request`
// fits `max_bytes` whole. An Init without values that does not fit cannot
// be split: RESOURCE_EXHAUSTED (declarations alone are a few dozen bytes per
// chunk, so it takes a chunk count beyond any limit a shard accepts).
absl::StatusOr<std::vector<int>> InitPartStarts(const v1::InitRequest& request,
                                                uint64_t max_bytes);

// Part `part` of `request` split at `starts` (InitPartStarts, more than one
// part): the request's worker, shard and config, values_part and
// values_parts, and its declarations. Built one at a time, so that a model
// travels with one part's copy beside it, not a second copy of all of it.
v1::InitRequest InitPart(const v1::InitRequest& request,
                         const std::vector<int>& starts, size_t part);

// Every part at once: `request` itself (values_parts unset) when it fits,
// otherwise InitPart of each.
absl::StatusOr<std::vector<v1::InitRequest>> SplitInit(
    const v1::InitRequest& request, uint64_t max_bytes);

// `request` with values_omitted and, per declaration, only the chunk's
// numel in `initial` (as worker/init_requests.h builds it).
v1::InitRequest WithoutValues(const v1::InitRequest& request);

// `request` itself when it fits `max_bytes`, otherwise pushes of the same
// worker and step whose chunks, in order, are the request's.
absl::StatusOr<std::vector<v1::PushRequest>> SplitPush(
    const v1::PushRequest& request, uint64_t max_bytes);

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_MESSAGE_PARTS_H_
