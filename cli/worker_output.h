// The output of `gradwire run`'s workers, as torchrun and horovodrun show
// it: every line a worker writes to stdout or stderr appears on this
// process's stdout or stderr behind its rank, "[0] ", "[1] ", ..., and, as
// written (no prefix, both streams in the order they arrived), in the
// worker's log file.
//
// Each worker's stdout and stderr are pipes. One relay thread reads them
// all (poll) and writes whole lines only: a line is written once its '\n'
// has arrived, with one fwrite per batch of lines, so that lines of
// different workers, and this process's own messages written with one call
// each (Announce in supervision.h), never mix within a line. Once
// kMaxLineBytes of a line are waiting for their '\n' (a progress bar that
// redraws with '\r'), they are written as a line of their own. A last line
// without '\n' is written, with one, when its pipe ends or when Finish
// stops waiting.
//
// Thread safety: the public methods are for one thread (the one that
// spawns the workers). Create it after the stop signals are blocked
// (Supervision) so that the relay thread inherits the mask.
#ifndef GRADWIRE_CLI_WORKER_OUTPUT_H_
#define GRADWIRE_CLI_WORKER_OUTPUT_H_

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gradwire::cli {

class WorkerOutput {
 public:
  // The longest piece of a line kept waiting for its '\n'.
  static constexpr size_t kMaxLineBytes = 64 << 10;

  // Pipes for workers 0..logs.size()-1 and their log files `logs[i]`
  // (created or truncated). Prefixed lines go to `out` and `err`.
  // UNAVAILABLE naming the file or the failed pipe call.
  static absl::StatusOr<std::unique_ptr<WorkerOutput>> Create(
      const std::vector<std::string>& logs, std::FILE* out = stdout,
      std::FILE* err = stderr);

  // Finish(absl::ZeroDuration()) if not finished; closes everything.
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // The write ends of worker `rank`'s stdout and stderr, close-on-exec, for
  // SpawnOptions::stdout_fd and stderr_fd; -1 once closed.
  int stdout_write_end(int rank) const { return write_ends_[2 * rank]; }
  int stderr_write_end(int rank) const { return write_ends_[2 * rank + 1]; }
  // Closes this process's copies of worker `rank`'s write ends. Call it
  // after spawning the worker (or failing to): a pipe ends only when no
  // process holds its write end any more.
  void CloseWriteEnds(int rank);

  // Starts the relay thread. Once.
  void Start();

  // Waits up to `drain` for every pipe to end (the workers, and whatever
  // they started, have exited), relays what is left to read, writes out
  // the last partial lines and stops the thread. Later calls do nothing.
  void Finish(absl::Duration drain);

 private:
  // One pipe: a worker's stdout or stderr.
  struct Stream {
    int read_fd = -1;
    int rank = 0;
    std::FILE* terminal = nullptr;  // stdout or stderr of this process
    std::FILE* log = nullptr;       // the worker's log, shared by its pair
    std::string partial;            // the start of a line without '\n' yet
  };

  WorkerOutput() = default;
  void Relay();
  int PollOnce(absl::Duration timeout);
  void ReadFrom(Stream& s);
  void Write(Stream& s, absl::string_view lines);
  void CloseStream(Stream& s);
  bool StopTimeReached();

  // Set by Create; afterwards streams_ belongs to the relay thread while it
  // runs (the main thread touches it again only after joining).
  std::vector<Stream> streams_;
  std::vector<std::FILE*> logs_;
  // The main thread's: write ends, 2 per worker.
  std::vector<int> write_ends_;
  std::thread thread_;
  bool finished_ = false;

  absl::Mutex mu_;
  // When the relay thread stops even if pipes are still open.
  absl::Time stop_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_WORKER_OUTPUT_H_
