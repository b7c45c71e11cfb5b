// The checks of `gradwire run`'s option values that need no flags, so that
// they can be tested alone: shard addresses and server arguments.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_CLI_RUN_ARGUMENTS_H_
#define GRADWIRE_CLI_RUN_ARGUMENTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire::cli {

// "HOST:PORT,HOST:PORT,..." split into its addresses, in order. HOST is a
// name or an IPv4 address, or an IPv6 address in brackets ("[::1]:7000");
// PORT is in [1, 65535]. INVALID_ARGUMENT quoting the first bad address
// (an empty one included) and saying what is wrong.
absl::StatusOr<std::vector<std::string>> ParseShardAddresses(
    absl::string_view text);

// The words of `text` (split on whitespace), each of which must be a
// --flag; INVALID_ARGUMENT quoting the first that is not.
absl::StatusOr<std::vector<std::string>> SplitServerArgs(
    absl::string_view text);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_ARGUMENTS_H_
