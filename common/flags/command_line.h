// Command-line conventions of gradwire binaries on top of Abseil flags.
//
// Flags are spelled with hyphens (--port-file) while Abseil names them with
// underscores (port_file); NormalizeFlagNames maps the first to the second,
// so both spellings work. --help prints the binary's own flags, each with
// its default, and exits 0 (Abseil's exits 1 and lists flags by file).
// Usage errors exit with kUsageExitCode.
//
// Containers set flags through the environment: GRADWIRE_<NAME> (the flag's
// Abseil name in upper case, e.g. GRADWIRE_SHARD_ID for --shard-id) gives
// the flag a value that the command line can still override. --dry-run
// (a flag each binary declares) checks a command line without running it:
// FlagValues shows what it resolved to.
#ifndef GRADWIRE_COMMON_FLAGS_COMMAND_LINE_H_
#define GRADWIRE_COMMON_FLAGS_COMMAND_LINE_H_

#include <string>

#include "absl/status/status.h"
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

// A paragraph for --help of binaries that call ApplyFlagEnvironment.
inline constexpr absl::string_view kFlagEnvironmentHelp =
    "Every flag can also be set through the environment as GRADWIRE_<NAME>\n"
    "(--shard-id: GRADWIRE_SHARD_ID); the command line wins. --dry-run checks\n"
    "the flags, prints the settings they resolve to, and exits (0 or 2).";

// The environment variable that sets flag `name`: "GRADWIRE_" + upper case.
std::string FlagEnvironmentVariable(absl::string_view name);

// For each flag in `flag_names` whose variable (FlagEnvironmentVariable) is
// set, parses the variable's value into the flag. Call it before Abseil
// parses the command line, so that a flag given there wins.
// INVALID_ARGUMENT naming the variable when a value does not parse (the
// flags parsed before it keep their new values: the caller exits).
absl::Status ApplyFlagEnvironment(
    absl::Span<const absl::string_view> flag_names);

// "--name=value" per flag in `flag_names`, one per line, with the flags'
// current values (hyphenated names; registered flags only).
std::string FlagValues(absl::Span<const absl::string_view> flag_names);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_FLAGS_COMMAND_LINE_H_
