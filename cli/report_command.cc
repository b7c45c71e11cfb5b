#include "cli/report_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/process/child_process.h"

#ifndef GRADWIRE_SOURCE_DIR
#error "GRADWIRE_SOURCE_DIR (the source tree, for its scripts/) must be set"
#endif

namespace gradwire::cli {
namespace {

constexpr char kScript[] = "gradwire_report.py";
constexpr char kDefaultInterpreter[] = "/usr/bin/python3";

constexpr absl::string_view kReportHelp =
    "gradwire report: tables and plots of gradwire runs from their summary "
    "JSON files\n(gradwire local --summary-json, gradwire-worker "
    "--summary-json).\n"
    "\n"
    "  gradwire report [--out=DIR] [--prefix=NAME] [--baseline=LABEL]\n"
    "                  [--label=NAME=FILE ...] SUMMARY.json ...\n"
    "\n"
    "Prints a table, one row per label: final test accuracy (mean ± half "
    "the range,\n(max - min) / 2, over the label's runs), points against "
    "the baseline, pushed\nand pulled MB, the reduction of pushed + pulled "
    "and of pushed bytes against the\nbaseline, wall seconds; and writes "
    "it to DIR/NAME.md with two plots:\n"
    "  DIR/NAME-accuracy.png  test accuracy against epoch, one line per "
    "label (mean)\n"
    "                         in a shaded min-max band;\n"
    "  DIR/NAME-bytes.png     final test accuracy against bytes pushed + "
    "pulled\n"
    "                         (log scale), error bars min-max.\n"
    "  DIR/NAME-auto.png      with --compressor=auto runs: each layer's "
    "chosen ratio\n"
    "                         and the measured link rate against the step.\n"
    "\n"
    "Flags:\n"
    "  --out=DIR          where the files go (default: .)\n"
    "  --prefix=NAME      file name prefix (default: report)\n"
    "  --baseline=LABEL   the row to compare with (default: the first "
    "label whose\n"
    "                     runs have \"compressor\": \"none\"; none: pushed "
    "bytes are\n"
    "                     compared with dense_equivalent_bytes)\n"
    "  --label=NAME=FILE  FILE is a run of NAME (default label: the file "
    "name without\n"
    "                     .json). Runs that share a label (several seeds) "
    "are one row.\n"
    "\n"
    "The script is scripts/gradwire_report.py, looked for in "
    "BIN/../share/gradwire/,\nBIN/../../scripts/ and the source tree "
    "gradwire was built from (BIN: the\ndirectory of this binary), and run "
    "by $GRADWIRE_PYTHON (default /usr/bin/python3)\nwith matplotlib "
    "(Debian: python3-matplotlib).\n"
    "Exit code: 0; 1 for a summary that cannot be read (named), a missing "
    "interpreter\nor matplotlib; 2 for a bad command line.\n";

}  // namespace

std::string ReportHelp() { return std::string(kReportHelp); }

std::string ReportInterpreter() {
  const char* python = std::getenv("GRADWIRE_PYTHON");
  return python != nullptr && *python != '\0' ? python : kDefaultInterpreter;
}

std::vector<std::string> ReportScriptCandidates(absl::string_view bin_dir) {
  return {absl::StrCat(bin_dir, "/../share/gradwire/", kScript),
          absl::StrCat(bin_dir, "/../../scripts/", kScript),
          absl::StrCat(GRADWIRE_SOURCE_DIR, "/scripts/", kScript)};
}

int RunReport(const std::vector<std::string>& args) {
  const std::string wanted = ReportInterpreter();
  absl::StatusOr<std::string> interpreter = FindExecutable(wanted);
  if (!interpreter.ok()) {
    absl::FPrintF(stderr,
                  "gradwire report: no Python interpreter: %s (install "
                  "python3 and python3-matplotlib, or name an interpreter "
                  "in $GRADWIRE_PYTHON)\n",
                  interpreter.status().message());
    return 1;
  }
  absl::StatusOr<std::string> bin_dir = SelfDirectory();
  if (!bin_dir.ok()) {
    absl::FPrintF(stderr, "gradwire report: %s\n", bin_dir.status().ToString());
    return 1;
  }
  const std::vector<std::string> candidates = ReportScriptCandidates(*bin_dir);
  std::string script;
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) {
      script = candidate;
      break;
    }
  }
  if (script.empty()) {
    absl::FPrintF(stderr, "gradwire report: %s not found; looked for %s\n",
                  kScript, absl::StrJoin(candidates, ", "));
    return 1;
  }
  // The script's messages name the command the user typed.
  setenv("GRADWIRE_REPORT_PROG", "gradwire report", /*overwrite=*/1);
  std::vector<std::string> words = {*interpreter, script};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execv(argv[0], argv.data());
  absl::FPrintF(stderr, "gradwire report: cannot run %s: %s\n", *interpreter,
                std::strerror(errno));
  return 1;
}

}  // namespace gradwire::cli
