#include "cli/command_args.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/flags/command_line.h"

namespace gradwire::cli {

[[noreturn]] void UsageError(absl::string_view command,
                             absl::string_view message) {
  absl::FPrintF(stderr, "gradwire%s%s: %s (see gradwire%s%s --help)\n",
                command.empty() ? "" : " ", command, message,
                command.empty() ? "" : " ", command);
  std::exit(kUsageExitCode);
}

bool Contains(absl::Span<const absl::string_view> names,
              absl::string_view name) {
  for (absl::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

// The Abseil name of a "--flag-name[=value]" argument ("flag_name"), or
// empty for an argument that is not a flag.
std::string FlagName(absl::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return "";
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  return absl::StrReplaceAll(arg.substr(0, arg.find('=')), {{"-", "_"}});
}

// Parses `own` ("--flag[=value]" arguments of `command`) with Abseil.
void ParseOwnFlags(absl::string_view command, std::vector<std::string> own) {
  std::string program = absl::StrCat("gradwire ", command);
  std::vector<char*> argv = {program.data()};
  for (std::string& arg : own) argv.push_back(arg.data());
  NormalizeFlagNames(static_cast<int>(argv.size()), argv.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  if (positional.size() > 1) {
    UsageError(command,
               absl::StrCat("unexpected argument '", positional[1], "'"));
  }
}

}  // namespace gradwire::cli
