// Bearer tokens: a shared secret that every gradwire.v1.ParameterServer call
// carries as the gRPC metadata "authorization: Bearer <token>".
//
// The token comes from a file (--auth-token-file) so that it never shows in
// a process listing or in --dry-run's output. Shards compare the token they
// receive with their own in constant time, so the time a refusal takes says
// nothing about how many leading bytes were right.
//
// Thread safety: every function is pure or reads only its arguments.
#ifndef GRADWIRE_COMMON_TLS_BEARER_TOKEN_H_
#define GRADWIRE_COMMON_TLS_BEARER_TOKEN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gradwire {

// The metadata key (gRPC keys are lower case) and the scheme of its value.
inline constexpr char kAuthorizationMetadataKey[] = "authorization";
inline constexpr char kBearerScheme[] = "Bearer ";

// Reads the token in `path`, the file named by `flag` (its Abseil or
// hyphenated name, used in messages): the content without trailing
// whitespace and newlines. INVALID_ARGUMENT naming --flag and the path when
// the file cannot be read, is empty after trimming, or holds characters
// other than printable ASCII without spaces (a token must fit an HTTP
// header value unchanged).
absl::StatusOr<std::string> LoadAuthToken(absl::string_view flag,
                                          const std::string& path);

// True when `a` and `b` are equal. The time taken depends only on the
// lengths, never on where the first difference is: every byte is looked at.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// "Bearer <token>": the metadata value a client sends.
std::string BearerAuthorizationValue(absl::string_view token);

// The shard's decision on one call, given the "authorization" value the
// call carried (nullopt: none) and the expected token (not empty):
//   OK                 "Bearer <expected>" (the scheme case-insensitive);
//   UNAUTHENTICATED    no authorization metadata, or not a Bearer value:
//                      the caller did not try to authenticate;
//   PERMISSION_DENIED  a Bearer token that is not the expected one: the
//                      caller tried and holds the wrong secret.
// Messages never contain either token.
absl::Status CheckBearerAuthorization(
    absl::optional<absl::string_view> authorization,
    absl::string_view expected_token);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_TLS_BEARER_TOKEN_H_
