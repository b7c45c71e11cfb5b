// One bearer token per worker: the file --worker-tokens-file names binds
// each worker id to a secret, so that holding the job's token is not enough
// to push, pull or Init as another worker (a stolen or shared token could
// otherwise push as worker W first, and W's real push would be
// acknowledged as a duplicate and dropped).
//
// File format: one "WORKER_ID TOKEN" pair per line; blank lines and lines
// starting with '#' are ignored. Ids and tokens are unique; a token is
// printable ASCII without spaces (it travels in an HTTP header).
//
// Thread safety: a WorkerTokens is immutable after loading.
#ifndef GRADWIRE_SERVER_PROCESS_WORKER_TOKENS_H_
#define GRADWIRE_SERVER_PROCESS_WORKER_TOKENS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gradwire {

struct WorkerTokens {
  // (worker id, token) in file order.
  std::vector<std::pair<uint32_t, std::string>> tokens;
};

// Parses the content of a tokens file. INVALID_ARGUMENT naming the line for
// a malformed line, a repeated id or token, or an empty file.
absl::StatusOr<WorkerTokens> ParseWorkerTokens(absl::string_view content);

// Reads and parses `path` (INVALID_ARGUMENT naming --worker-tokens-file and
// the path when it cannot be read or is malformed).
absl::StatusOr<WorkerTokens> LoadWorkerTokens(const std::string& path);

// Who a call is, from its "authorization" metadata value (nullopt: none):
//   a worker id    the Bearer token of that worker in `workers`;
//   nullopt        the job's shared token `shared` (when not empty): a
//                  caller that may only ask for GetInfo when `workers` is
//                  not empty, and anything when it is;
//   UNAUTHENTICATED  no authorization, or not a Bearer value;
//   PERMISSION_DENIED  a Bearer token that is none of these.
// Every token is compared in constant time, all of them every call.
absl::StatusOr<std::optional<uint32_t>> IdentifyCaller(
    absl::optional<absl::string_view> authorization, absl::string_view shared,
    const WorkerTokens& workers);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_WORKER_TOKENS_H_
