// What the gradwire commands share in reading their command lines: usage
// errors that name the command and exit, flag names, and parsing a
// command's own flags with Abseil.
//
// Thread safety: for main() only (Abseil's flags are global).
#ifndef GRADWIRE_CLI_COMMAND_ARGS_H_
#define GRADWIRE_CLI_COMMAND_ARGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire::cli {

// Prints "gradwire COMMAND: MESSAGE (see gradwire COMMAND --help)" on
// stderr and exits with kUsageExitCode (2). `command` empty: the tool's own
// usage.
[[noreturn]] void UsageError(absl::string_view command,
                             absl::string_view message);

// Whether `names` holds `name`.
bool Contains(absl::Span<const absl::string_view> names,
              absl::string_view name);

// The Abseil name of a "--flag-name[=value]" argument ("flag_name"), or
// empty for an argument that is not a flag.
std::string FlagName(absl::string_view arg);

// Parses `own` ("--flag[=value]" arguments of `command`) with Abseil,
// dashes or underscores alike; a usage error for a positional argument or
// a flag Abseil does not know.
void ParseOwnFlags(absl::string_view command, std::vector<std::string> own);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_COMMAND_ARGS_H_
