// What `gradwire local` and `gradwire run` share in supervising the
// processes they start: the members (shards, workers, Prometheus), the
// stop signals, the failures seen, and stopping a group with a grace period
// before SIGKILL.
//
// A run polls its members from one loop. Supervision::Sleep is that loop's
// only wait, so a stop signal (SIGINT, SIGTERM, SIGHUP; see stop_signals.h)
// ends any wait at once and is remembered: the first one decides the exit
// code (128 + N) and a second one cuts the grace periods short.
//
// Thread safety: none. Construct it in the main thread before any other
// thread starts (StopSignals blocks the signals, and later threads inherit
// the mask) and use it from that thread only. Announce may be called from
// any thread.
#ifndef GRADWIRE_CLI_SUPERVISION_H_
#define GRADWIRE_CLI_SUPERVISION_H_

#include <signal.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/stop_signals.h"
#include "common/process/child_process.h"

namespace gradwire::cli {

// A supervised process.
struct Member {
  std::string name;  // "shard 0", "worker 1", "prometheus"
  // A worker's id (its rank); -1 for the others.
  int rank = -1;
  // Its log file, shown (its tail) when it fails.
  std::string log;
  // Its output was already shown as it came (gradwire run relays every
  // line): a failure is reported without the log's tail.
  bool output_shown = false;
  std::unique_ptr<ChildProcess> process;
  // Set before this process is asked to stop: an exit after that is not a
  // failure of its own.
  bool stopping = false;
  // gradwire local and run: where a worker writes the port of its /metrics
  // endpoint, and whether its URL was printed.
  std::string metrics_port_file;
  bool metrics_reported = false;
};

// A failure, in the order seen: a member's (its name, rank and exit code if
// it exited), or one of the run itself (empty name, rank -1, no code).
struct Failure {
  std::string name;
  int rank = -1;
  std::optional<int> exit_code;
};

// Writes "<tool>: <message>\n" to `stream` in one call, after flushing
// stdout (so that a message on stderr comes after what was printed
// before). One call keeps the line whole among other threads' writes.
void Announce(std::FILE* stream, absl::string_view tool,
              absl::string_view message);

class Supervision {
 public:
  // `tool` ("gradwire local") starts each message; `info` receives the
  // progress messages (Inform), stderr the problems (Say). `grace`: how
  // long a stopped group may take to exit before SIGKILL.
  Supervision(std::string tool, std::FILE* info, absl::Duration grace);

  void Inform(absl::string_view message) const;
  void Say(absl::string_view message) const;

  // Sleeps up to `d`; true when a stop signal came (and is remembered).
  bool Sleep(absl::Duration d);
  // Waits up to `d` for a stop signal without remembering it (a signal
  // that only ends an optional wait); its number, or 0.
  int WaitForSignal(absl::Duration d) const { return signals_.Wait(d); }
  // The first stop signal; 0 when none came.
  int stop_signal() const { return stop_signal_; }

  // Records a failure of `m` and says so: "<name> <why>", followed by the
  // last lines of its log unless its output was shown already.
  void ReportFailure(const Member& m, absl::string_view why);
  // Records a failure of the run itself and says `message`.
  void Fail(absl::string_view message);
  bool failed() const { return !failures_.empty(); }
  const std::vector<Failure>& failures() const { return failures_; }

  // Reports each member of `group` that has exited while not stopping as a
  // failure, "<name> exited with code N <when>", and marks it stopping.
  void ReportUnexpectedExits(std::vector<Member>& group,
                             absl::string_view when);

  // Reaps the workers: reports each that exited with a non-zero code while
  // not stopping as a failure, "<name> exited with code N", and marks it
  // stopping. Returns whether every worker has exited.
  bool ReapWorkers(std::vector<Member>& workers);

  // Sends `signal` to every running member of `group` (marking each as
  // stopping), waits up to the grace period for them to exit, then
  // SIGKILLs and reaps the rest. The wait is skipped once two stop signals
  // have come, and cut short by one arriving meanwhile.
  void Stop(std::vector<Member>& group, int signal = SIGTERM);

 private:
  bool AnyRunning(std::vector<Member>& group) const;

  // Constant after construction.
  const std::string tool_;
  std::FILE* const info_;
  const absl::Duration grace_;
  const StopSignals signals_;
  // The run's state, from the main thread only.
  int stop_signal_ = 0;
  int stop_signals_received_ = 0;
  std::vector<Failure> failures_;
};

// "SIGTERM", "SIGINT", ...: the name of a stop signal, or "signal N".
std::string SignalName(int signal);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_SUPERVISION_H_
