#include "server/process/worker_tokens.h"

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/tls/bearer_token.h"

namespace gradwire {
namespace {

bool IsTokenText(absl::string_view token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return !token.empty();
}

}  // namespace

absl::StatusOr<WorkerTokens> ParseWorkerTokens(absl::string_view content) {
  WorkerTokens parsed;
  absl::flat_hash_set<uint32_t> ids;
  absl::flat_hash_set<std::string> seen;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint32_t id = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &id) ||
        !IsTokenText(fields[1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "line %d: expected \"WORKER_ID TOKEN\" (a token of printable "
          "characters without spaces)",
          number));
    }
    if (!ids.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("line %d: worker %d appears twice", number, id));
    }
    if (!seen.insert(std::string(fields[1])).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "line %d: the token of worker %d is another worker's too", number,
          id));
    }
    parsed.tokens.emplace_back(id, std::string(fields[1]));
  }
  if (parsed.tokens.empty()) {
    return absl::InvalidArgumentError("no \"WORKER_ID TOKEN\" line");
  }
  return parsed;
}

absl::StatusOr<WorkerTokens> LoadWorkerTokens(const std::string& path) {
  std::ifstream file(path);
  std::stringstream content;
  if (!file || !(content << file.rdbuf())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--worker-tokens-file: cannot read %s", path));
  }
  absl::StatusOr<WorkerTokens> parsed = ParseWorkerTokens(content.str());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--worker-tokens-file: %s: %s", path, parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<std::optional<uint32_t>> IdentifyCaller(
    absl::optional<absl::string_view> authorization, absl::string_view shared,
    const WorkerTokens& workers) {
  // Whatever the candidate, CheckBearerAuthorization tells a missing or
  // non-Bearer value (UNAUTHENTICATED) from a wrong token.
  const absl::string_view first_candidate =
      !shared.empty() ? shared : absl::string_view(workers.tokens[0].second);
  const absl::Status shape =
      CheckBearerAuthorization(authorization, first_candidate);
  if (absl::IsUnauthenticated(shape)) return shape;
  bool shared_matches = !shared.empty() && shape.ok();
  std::optional<uint32_t> worker;
  // Every token is compared, so the time says nothing about which matched.
  for (const auto& [id, token] : workers.tokens) {
    if (CheckBearerAuthorization(authorization, token).ok()) worker = id;
  }
  if (worker.has_value()) return worker;
  if (shared_matches) return std::optional<uint32_t>();
  return absl::PermissionDeniedError(
      "the bearer token is not one this shard accepts");
}

}  // namespace gradwire
