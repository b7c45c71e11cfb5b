#include "common/flags/program.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flags/command_line.h"

ABSL_FLAG(bool, dry_run, false,
          "Check the flags, print the settings they resolve to, and exit "
          "without doing anything else (exit 0; 2 for a bad flag).");

// Abseil reports a malformed flag (unknown name, unparsable value) through
// this hook and then exits with 1; exiting here gives every usage error the
// same code. The message is already on stderr. Defined in the same file as
// ParseFlagsOrExit so that every binary that parses flags links it.
extern "C" void ABSL_INTERNAL_C_SYMBOL(AbslInternalReportFatalUsageError)(
    absl::string_view) {
  _exit(gradwire::kUsageExitCode);
}

namespace gradwire {

std::vector<absl::string_view> JoinFlagNames(
    std::initializer_list<absl::Span<const absl::string_view>> lists) {
  std::vector<absl::string_view> names;
  for (absl::Span<const absl::string_view> list : lists) {
    names.insert(names.end(), list.begin(), list.end());
  }
  return names;
}

void ParseFlagsOrExit(const ProgramFlags& program, int argc, char** argv) {
  absl::SetProgramUsageMessage(program.usage);
  if (IsHelpRequest(argc, argv)) {
    std::fputs(
        FlagsHelp(absl::StrCat(program.usage, "\n\n", kFlagEnvironmentHelp),
                  program.flag_names)
            .c_str(),
        stdout);
    std::exit(0);
  }
  NormalizeFlagNames(argc, argv);
  if (absl::Status s = ApplyFlagEnvironment(program.flag_names); !s.ok()) {
    ExitWithUsageError(program, s);
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    ExitWithUsageError(program,
                       absl::InvalidArgumentError(absl::StrCat(
                           "unexpected argument '", positional[1], "'")));
  }
}

void ExitWithUsageError(const ProgramFlags& program,
                        const absl::Status& status) {
  absl::FPrintF(stderr, "%s: %s (see --help)\n", program.name,
                status.message());
  std::exit(kUsageExitCode);
}

bool DryRunRequested() { return absl::GetFlag(FLAGS_dry_run); }

void ExitAfterDryRunIfRequested(const ProgramFlags& program) {
  if (!DryRunRequested()) return;
  std::fputs(FlagValues(program.flag_names).c_str(), stdout);
  std::exit(0);
}

}  // namespace gradwire
