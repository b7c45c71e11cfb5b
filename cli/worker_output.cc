#include "cli/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// After Finish's deadline: the rounds of reading what is still buffered in
// the pipes (each round reads up to 64 KiB per pipe).
constexpr int kFinalRounds = 64;

void WriteAll(std::FILE* stream, absl::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerOutput>> WorkerOutput::Create(
    const std::vector<std::string>& logs, std::FILE* out, std::FILE* err) {
  std::unique_ptr<WorkerOutput> output(new WorkerOutput());
  for (size_t rank = 0; rank < logs.size(); ++rank) {
    // "e": close-on-exec, so that no child holds another's log open.
    std::FILE* log = std::fopen(logs[rank].c_str(), "we");
    if (log == nullptr) {
      return absl::ErrnoToStatus(errno, absl::StrCat("open ", logs[rank]));
    }
    output->logs_.push_back(log);
    for (std::FILE* terminal : {out, err}) {
      int ends[2];
      if (pipe2(ends, O_CLOEXEC) != 0)
        return absl::ErrnoToStatus(errno, "pipe");
      Stream s;
      s.read_fd = ends[0];
      s.rank = static_cast<int>(rank);
      s.terminal = terminal;
      s.log = log;
      output->streams_.push_back(std::move(s));
      output->write_ends_.push_back(ends[1]);
    }
  }
  return output;
}

WorkerOutput::~WorkerOutput() {
  Finish(absl::ZeroDuration());
  for (Stream& s : streams_) CloseStream(s);
  for (std::FILE* log : logs_) std::fclose(log);
}

void WorkerOutput::CloseWriteEnds(int rank) {
  for (int* end : {&write_ends_[2 * rank], &write_ends_[2 * rank + 1]}) {
    if (*end >= 0) close(*end);
    *end = -1;
  }
}

void WorkerOutput::Start() {
  thread_ = std::thread([this] { Relay(); });
}

void WorkerOutput::Finish(absl::Duration drain) {
  if (finished_) return;
  finished_ = true;
  for (int& end : write_ends_) {
    if (end >= 0) close(end);
    end = -1;
  }
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_at_ = absl::Now() + drain;
  }
  thread_.join();
}

bool WorkerOutput::StopTimeReached() {
  absl::MutexLock lock(&mu_);
  return absl::Now() >= stop_at_;
}

void WorkerOutput::Relay() {
  while (!StopTimeReached()) {
    if (PollOnce(kPollInterval) < 0) return;  // Every pipe has ended.
  }
  for (int round = 0;
       round < kFinalRounds && PollOnce(absl::ZeroDuration()) > 0; ++round) {
  }
  // Pipes still open belong to processes that outlived the workers: what
  // they write from now on is not shown.
  for (Stream& s : streams_) {
    if (s.read_fd < 0) continue;
    if (!s.partial.empty()) Write(s, absl::StrCat(s.partial, "\n"));
    s.partial.clear();
    CloseStream(s);
  }
}

// Waits up to `timeout` and reads once from each pipe that is ready. The
// number of pipes that were ready; -1 when none is open.
int WorkerOutput::PollOnce(absl::Duration timeout) {
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (Stream& s : streams_) {
    if (s.read_fd < 0) continue;
    fds.push_back({s.read_fd, POLLIN, 0});
    streams.push_back(&s);
  }
  if (fds.empty()) return -1;
  const int ready = poll(fds.data(), fds.size(),
                         static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (ready <= 0) return 0;  // Nothing yet, or EINTR.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadFrom(*streams[i]);
  }
  return ready;
}

void WorkerOutput::ReadFrom(Stream& s) {
  char buffer[64 << 10];
  const ssize_t n = read(s.read_fd, buffer, sizeof(buffer));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {  // The pipe ended (or failed): the last line goes out.
    if (!s.partial.empty()) Write(s, absl::StrCat(s.partial, "\n"));
    s.partial.clear();
    CloseStream(s);
    return;
  }
  s.partial.append(buffer, static_cast<size_t>(n));
  std::string complete;
  if (const size_t end = s.partial.rfind('\n'); end != std::string::npos) {
    complete = s.partial.substr(0, end + 1);
    s.partial.erase(0, end + 1);
  }
  while (s.partial.size() >= kMaxLineBytes) {
    absl::StrAppend(&complete, s.partial.substr(0, kMaxLineBytes), "\n");
    s.partial.erase(0, kMaxLineBytes);
  }
  if (!complete.empty()) Write(s, complete);
}

// `lines`: whole lines, each ending in '\n'.
void WorkerOutput::Write(Stream& s, absl::string_view lines) {
  const std::string prefix = absl::StrCat("[", s.rank, "] ");
  std::string prefixed;
  prefixed.reserve(lines.size() + 8 * prefix.size());
  lines.remove_suffix(1);
  for (absl::string_view line : absl::StrSplit(lines, '\n')) {
    absl::StrAppend(&prefixed, prefix, line, "\n");
  }
  WriteAll(s.terminal, prefixed);
  WriteAll(s.log, absl::StrCat(lines, "\n"));
}

void WorkerOutput::CloseStream(Stream& s) {
  if (s.read_fd >= 0) close(s.read_fd);
  s.read_fd = -1;
}

}  // namespace gradwire::cli
