// gradwire-settings-doc: prints docs/reference/settings.md, the reference
// of every worker setting, made from worker/settings_table.h. `make
// settings-doc` writes it into the tree; a unit test compares the two.
#include <cstdio>
#include <string>

#include "worker/settings_reference.h"

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr,
                 "usage: %s > docs/reference/settings.md\n"
                 "Prints the settings reference (Markdown) on stdout.\n",
                 argv[0]);
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  const std::string page = gradwire::SettingsReferenceMarkdown();
  std::fwrite(page.data(), 1, page.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
