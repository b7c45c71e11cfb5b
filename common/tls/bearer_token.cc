#include "common/tls/bearer_token.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tls/transport_security.h"

namespace gradwire {
namespace {

// Printable ASCII without the space: what RFC 6750's b64token allows and
// more, and what an HTTP/2 header value carries unchanged.
bool IsTokenCharacter(char c) { return c > ' ' && c < 0x7f; }

}  // namespace

absl::StatusOr<std::string> LoadAuthToken(absl::string_view flag,
                                          const std::string& path) {
  absl::StatusOr<std::string> content = ReadFlagFile(flag, path);
  if (!content.ok()) return content.status();
  const absl::string_view token = absl::StripTrailingAsciiWhitespace(*content);
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s=%s: the token file is empty (write a random token into it, "
        "e.g. with scripts/dev-certs.sh)",
        flag, path));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    if (!IsTokenCharacter(token[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s: byte %d of the token is not printable ASCII without "
          "spaces",
          flag, path, i));
    }
  }
  return std::string(token);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of `a` is compared with a byte of `b` (or with a zero past
  // its end), and differences are OR-ed without a branch on them, so the
  // work depends on the lengths only. A differing length alone also makes
  // the result false. The volatile accumulator keeps the compiler from
  // turning the loop into an early-exit comparison.
  volatile uint8_t difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const uint8_t other =
        i < b.size() ? static_cast<uint8_t>(b[i]) : static_cast<uint8_t>(0);
    difference = difference | (static_cast<uint8_t>(a[i]) ^ other);
  }
  return difference == 0;
}

std::string BearerAuthorizationValue(absl::string_view token) {
  return absl::StrCat(kBearerScheme, token);
}

absl::Status CheckBearerAuthorization(
    absl::optional<absl::string_view> authorization,
    absl::string_view expected_token) {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "missing 'authorization: Bearer <token>' metadata (this shard "
        "requires --auth-token-file)");
  }
  const absl::string_view scheme = kBearerScheme;
  if (authorization->size() < scheme.size() ||
      !absl::EqualsIgnoreCase(authorization->substr(0, scheme.size()),
                              scheme)) {
    return absl::UnauthenticatedError(
        "the authorization metadata is not a Bearer token");
  }
  // The length of the expected token is what the comparison's time depends
  // on, and it is the same for every caller.
  if (!ConstantTimeEquals(expected_token,
                          authorization->substr(scheme.size()))) {
    return absl::PermissionDeniedError("wrong bearer token");
  }
  return absl::OkStatus();
}

}  // namespace gradwire
