#include "cli/supervision.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr int kLogTailLines = 15;

}  // namespace

void Announce(std::FILE* stream, absl::string_view tool,
              absl::string_view message) {
  std::fflush(stdout);
  const std::string line = absl::StrCat(tool, ": ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fflush(stream);
}

std::string SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGKILL:
      return "SIGKILL";
    default:
      return absl::StrCat("signal ", signal);
  }
}

Supervision::Supervision(std::string tool, std::FILE* info,
                         absl::Duration grace)
    : tool_(std::move(tool)), info_(info), grace_(grace) {}

void Supervision::Inform(absl::string_view message) const {
  Announce(info_, tool_, message);
}

void Supervision::Say(absl::string_view message) const {
  Announce(stderr, tool_, message);
}

bool Supervision::Sleep(absl::Duration d) {
  const int s = signals_.Wait(d);
  if (s == 0) return false;
  if (stop_signal_ == 0) stop_signal_ = s;
  ++stop_signals_received_;
  return true;
}

void Supervision::ReportFailure(const Member& m, absl::string_view why) {
  failures_.push_back({m.name, m.rank, m.process->exit_code()});
  if (m.output_shown) {
    Say(absl::StrCat(m.name, " ", why));
    return;
  }
  const std::string tail = TailOfFile(m.log, kLogTailLines);
  Say(absl::StrCat(m.name, " ", why, "; last lines of ", m.log, ":\n",
                   tail.empty()
                       ? "  (empty)"
                       : absl::StrCat("  | ", absl::StrReplaceAll(
                                                  tail, {{"\n", "\n  | "}}))));
}

void Supervision::Fail(absl::string_view message) {
  failures_.push_back({});
  Say(message);
}

bool Supervision::ReapWorkers(std::vector<Member>& workers) {
  bool done = true;
  for (Member& w : workers) {
    if (w.process->running()) {
      done = false;
    } else if (*w.process->exit_code() != 0 && !w.stopping) {
      w.stopping = true;
      ReportFailure(w,
                    absl::StrCat("exited with code ", *w.process->exit_code()));
    }
  }
  return done;
}

void Supervision::ReportUnexpectedExits(std::vector<Member>& group,
                                        absl::string_view when) {
  for (Member& m : group) {
    if (!m.stopping && !m.process->running()) {
      m.stopping = true;
      ReportFailure(m, absl::StrCat("exited with code ",
                                    *m.process->exit_code(), " ", when));
    }
  }
}

bool Supervision::AnyRunning(std::vector<Member>& group) const {
  return std::any_of(group.begin(), group.end(),
                     [](Member& m) { return m.process->running(); });
}

void Supervision::Stop(std::vector<Member>& group, int signal) {
  bool any = false;
  for (Member& m : group) {
    m.stopping = true;
    if (m.process->running()) {
      m.process->Signal(signal);
      any = true;
    }
  }
  if (!any) return;
  const absl::Time deadline = absl::Now() + grace_;
  // A stop signal now (a second Ctrl-C) cuts the grace period short.
  bool hurried = stop_signals_received_ >= 2;
  while (!hurried && AnyRunning(group) && absl::Now() < deadline) {
    hurried = Sleep(kPollInterval);
  }
  for (Member& m : group) {
    if (!m.process->running()) continue;
    Say(absl::StrCat(
        "killing ", m.name,
        hurried ? ""
                : absl::StrCat(" (still running ", absl::FormatDuration(grace_),
                               " after ", SignalName(signal), ")")));
    m.process->Signal(SIGKILL);
    m.process->Wait();
  }
}

}  // namespace gradwire::cli
