#include "cli/stop_signals.h"

#include <cerrno>

namespace gradwire::cli {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    sigaddset(&set_, s);
    // A shell starts background jobs with SIGINT ignored; an ignored
    // signal is discarded instead of queued. Blocked, the default action
    // cannot run.
    signal(s, SIG_DFL);
  }
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::Wait(absl::Duration timeout) const {
  const timespec ts = absl::ToTimespec(timeout);
  for (;;) {
    const int s = sigtimedwait(&set_, nullptr, &ts);
    if (s > 0) return s;
    if (errno != EINTR) return 0;
  }
}

}  // namespace gradwire::cli
