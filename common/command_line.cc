#include "common/command_line.h"

#include <cstring>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
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

}  // namespace gradwire
