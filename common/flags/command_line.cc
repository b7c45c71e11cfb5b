#include "common/flags/command_line.h"

#include <cstdlib>
#include <cstring>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gradwire {

void NormalizeFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) return;
    if (arg[0] != '-') continue;
    char* name = arg + (arg[1] == '-' ? 2 : 1);
    for (char* c = name; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

bool IsHelpRequest(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "-h" || arg == "-help" || arg == "--help" ||
        arg == "--helpfull" || arg == "--helpshort") {
      return true;
    }
  }
  return false;
}

std::string FlagsHelp(absl::string_view usage,
                      absl::Span<const absl::string_view> flag_names) {
  std::string text = absl::StrCat(usage, "\n\nFlags:\n");
  for (absl::string_view name : flag_names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const std::string shown_default = flag->DefaultValue();
    absl::StrAppend(
        &text, "  --", absl::StrReplaceAll(name, {{"_", "-"}}),
        " (default: ", shown_default.empty() ? "\"\"" : shown_default,
        ")\n      ", flag->Help(), "\n");
  }
  return text;
}

std::string FlagEnvironmentVariable(absl::string_view name) {
  return absl::StrCat("GRADWIRE_", absl::AsciiStrToUpper(name));
}

absl::Status ApplyFlagEnvironment(
    absl::Span<const absl::string_view> flag_names) {
  for (absl::string_view name : flag_names) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const std::string variable = FlagEnvironmentVariable(name);
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat(variable, "='", value, "' (for --",
                       absl::StrReplaceAll(name, {{"_", "-"}}), "): ", error));
    }
  }
  return absl::OkStatus();
}

std::string FlagValues(absl::Span<const absl::string_view> flag_names) {
  std::string text;
  for (absl::string_view name : flag_names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    absl::StrAppend(&text, "--", absl::StrReplaceAll(name, {{"_", "-"}}), "=",
                    flag->CurrentValue(), "\n");
  }
  return text;
}

}  // namespace gradwire
