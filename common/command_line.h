// Command-line conventions of gradwire binaries on top of Abseil flags.
//
// Flags are spelled with hyphens (--port-file) while Abseil names them with
// underscores (port_file); NormalizeFlagNames maps the first to the second,
// so both spellings work. --help prints the binary's own flags, each with
// its default, and exits 0 (Abseil's exits 1 and lists flags by file).
// Usage errors exit with kUsageExitCode.
#ifndef GRADWIRE_COMMON_COMMAND_LINE_H_
#define GRADWIRE_COMMON_COMMAND_LINE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

// Exit code for a bad command line (malformed or invalid flag value,
// unknown flag), before the program does anything.
inline constexpr int kUsageExitCode = 2;

// Replaces '-' with '_' in the name part of every "--name[=value]" or
// "-name[=value]" argument, in place, up to a bare "--". Values are left
// alone.
void NormalizeFlagNames(int argc, char** argv);

// True when an argument (before a bare "--") is -h, -help, --help,
// --helpfull or --helpshort.
bool IsHelpRequest(int argc, char** argv);

// `usage`, then one entry per flag in `flag_names` (Abseil names, with
// underscores), shown as --hyphenated-name with its help text and default.
// Names that are not registered flags are skipped.
std::string FlagsHelp(absl::string_view usage,
                      absl::Span<const absl::string_view> flag_names);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMMAND_LINE_H_
