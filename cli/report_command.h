// `gradwire report`: the table and the two plots of
// bench/convergence/convergence.py (accuracy per epoch, accuracy against bytes)
// from any summary JSON files. The work is done by scripts/gradwire_report.py
// (Python and matplotlib); this command finds the interpreter and the script
// and replaces itself with `INTERPRETER SCRIPT ARGS...`, so that the script's
// output and exit code are the command's.
#ifndef GRADWIRE_CLI_REPORT_COMMAND_H_
#define GRADWIRE_CLI_REPORT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gradwire::cli {

// --help text of `gradwire report`.
std::string ReportHelp();

// The interpreter that runs the script: $GRADWIRE_PYTHON when set and not
// empty (a path, or a name looked up in PATH), else /usr/bin/python3.
std::string ReportInterpreter();

// Where gradwire_report.py is looked for, in this order, given the
// directory of the running binary `bin_dir`:
//   1. BIN_DIR/../share/gradwire/  an installed layout (PREFIX/bin/gradwire
//                                  beside PREFIX/share/gradwire/);
//   2. BIN_DIR/../../scripts/      a build tree in the source tree
//                                  (SOURCE/build/bin/gradwire);
//   3. SOURCE/scripts/             the source tree this binary was built
//                                  from (compiled in; any build tree).
// The first readable file wins.
std::vector<std::string> ReportScriptCandidates(absl::string_view bin_dir);

// Runs `gradwire report` with `args` (what follows "report"; the script
// parses them). Does not return when the script starts: its exit code is
// the process's (0; 1 for a summary it cannot read or a missing
// matplotlib; 2 for a bad command line). Returns 1, with a message on
// stderr, when the interpreter or the script is not found or cannot be
// started.
int RunReport(const std::vector<std::string>& args);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_REPORT_COMMAND_H_
