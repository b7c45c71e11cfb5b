// The command-line handling every gradwire binary shares: --help, the
// GRADWIRE_<NAME> environment, hyphenated flag names, --dry-run and the
// usage exit code.
//
//   int main(int argc, char** argv) {
//     const ProgramFlags program = {"gradwire-server", kUsage, kFlagNames};
//     ParseFlagsOrExit(program, argc, argv);
//     absl::StatusOr<Options> options = OptionsFromFlags();
//     if (!options.ok()) ExitWithUsageError(program, options.status());
//     ExitAfterDryRunIfRequested(program);
//     ...
//   }
//
// Linking this library also makes Abseil's own usage errors (an unknown
// flag, a value that does not parse) exit with kUsageExitCode instead of 1.
//
// Thread safety: for main() only (Abseil's flags are global).
#ifndef GRADWIRE_COMMON_FLAGS_PROGRAM_H_
#define GRADWIRE_COMMON_FLAGS_PROGRAM_H_

#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

// What a binary tells the shared handling about itself.
struct ProgramFlags {
  // The name in messages: "gradwire-server".
  absl::string_view name;
  // The first paragraphs of --help.
  absl::string_view usage;
  // Abseil names (underscores) of the flags --help, --dry-run and the
  // environment cover, in the order --help shows them.
  absl::Span<const absl::string_view> flag_names;
};

// The name of the --dry-run flag, which this library defines: a binary
// lists it among its flags.
inline constexpr absl::string_view kDryRunFlagNames[] = {"dry_run"};

// The lists one after another: a binary's own flag names and the shared
// ones (kMetricsFlagNames, kServerTlsFlagNames, kDryRunFlagNames, ...).
std::vector<absl::string_view> JoinFlagNames(
    std::initializer_list<absl::Span<const absl::string_view>> lists);

// Prints --help and exits 0 when asked; maps hyphenated names to Abseil's;
// applies GRADWIRE_<NAME> variables; parses the command line. Exits with
// kUsageExitCode (message on stderr) for a bad variable, a bad flag or a
// positional argument. `argv` is changed in place.
void ParseFlagsOrExit(const ProgramFlags& program, int argc, char** argv);

// Prints "NAME: MESSAGE (see --help)" on stderr and exits with
// kUsageExitCode.
[[noreturn]] void ExitWithUsageError(const ProgramFlags& program,
                                     const absl::Status& status);

// With --dry-run: prints every flag of `program` with its value
// ("--name=value" lines, FlagValues) and exits 0. Call it after the flags
// were checked. Without --dry-run it returns.
void ExitAfterDryRunIfRequested(const ProgramFlags& program);

// Whether --dry-run was given (for binaries that print more than the flags).
bool DryRunRequested();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_FLAGS_PROGRAM_H_
