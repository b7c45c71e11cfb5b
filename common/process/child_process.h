// Child processes that a gradwire tool supervises (`gradwire local`'s shards
// and workers, gradwire-bench-load's shards): started with fork/exec, each in
// a process group of its own, and tied to the parent's life.
//
// A ChildProcess is its own process-group leader, so a signal reaches
// everything it may have started, and a Ctrl-C on the terminal (which goes to
// the terminal's foreground group) reaches only the parent, which then
// stops its children in order. Each child also has PR_SET_PDEATHSIG(SIGTERM):
// if the parent dies, even by SIGKILL, its children get SIGTERM. The
// destructor SIGKILLs and reaps a child that still runs, so no exit path of
// the parent leaves one behind.
//
// Thread safety: none; use a ChildProcess from the thread that started it
// (PR_SET_PDEATHSIG fires when that thread exits).
#ifndef GRADWIRE_COMMON_PROCESS_CHILD_PROCESS_H_
#define GRADWIRE_COMMON_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gradwire {

struct SpawnOptions {
  // The program's arguments. argv[0] is also the path of the binary
  // (execve, no PATH search) unless `program` is set.
  std::vector<std::string> argv;
  // The binary to execute, a path; empty: argv[0]. Set it to run a command
  // with its argv[0] as the user wrote it (e.g. "python3", found in PATH by
  // FindExecutable), as execvp would.
  std::string program;
  // Extra "NAME=value" entries; they replace variables of the same name in
  // the parent's environment.
  std::vector<std::string> extra_env;
  // Names of variables of the parent's environment the child does not get
  // (an entry of extra_env with the same name is still added).
  std::vector<std::string> unset_env;
  // Where stdout and stderr go: a file (created or truncated), or the
  // parent's own descriptor when empty. Equal paths share one descriptor,
  // so the two streams interleave in order. stdin is always /dev/null.
  std::string stdout_path;
  std::string stderr_path;
  // A descriptor of the parent (the write end of a pipe, say) that becomes
  // the child's stdout or stderr instead of the path above; -1: none. The
  // caller keeps ownership and closes it after Spawn. It should be
  // close-on-exec, so that no other child inherits it.
  int stdout_fd = -1;
  int stderr_fd = -1;
};

class ChildProcess {
 public:
  // Forks and execs. Errors: fork failed, or a log file cannot be created
  // (checked before the fork). A binary that cannot be executed shows up as
  // exit code 127, with the reason in the child's stderr.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const SpawnOptions& options);

  // SIGKILLs the child's process group if the child was not reaped, and
  // reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reaps the child if it has exited, without blocking. True once it has.
  bool Poll();
  bool running() { return !Poll(); }
  // The exit code, or 128 + the signal number that ended it; empty while it
  // runs (as of the last Poll).
  std::optional<int> exit_code() const { return exit_code_; }

  // Blocks until the child exits; returns exit_code().
  int Wait();

  // Sends `signal` to the child's process group, unless it was reaped.
  void Signal(int signal);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  const pid_t pid_;
  std::optional<int> exit_code_;
};

// The directory holding the running binary (from /proc/self/exe).
absl::StatusOr<std::string> SelfDirectory();

// The file execvp would run for `program`, as a path that execve (and so
// Spawn) can run: `program` itself when it contains a slash, otherwise the
// first directory of $PATH (an empty entry is the current directory; unset,
// "/bin:/usr/bin") that holds a regular file of that name which this process
// may execute. NOT_FOUND when no such file exists, naming what was looked
// for; INVALID_ARGUMENT for an empty `program`.
absl::StatusOr<std::string> FindExecutable(const std::string& program);

// The last `max_lines` lines of a file (whole lines, without a trailing
// newline); empty if the file cannot be read. Reads at most the last 64 KiB.
std::string TailOfFile(const std::string& path, int max_lines);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_PROCESS_CHILD_PROCESS_H_
