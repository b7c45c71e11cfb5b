// The stop signals of `gradwire local` (SIGINT, SIGTERM, SIGHUP), blocked
// and taken synchronously, so that the supervision loop decides when to
// stop the children instead of a handler interrupting it.
//
// Thread safety: construct in the main thread before any other thread
// starts (later threads inherit the mask); Wait from that thread.
#ifndef GRADWIRE_CLI_STOP_SIGNALS_H_
#define GRADWIRE_CLI_STOP_SIGNALS_H_

#include <signal.h>

#include "absl/time/time.h"

namespace gradwire::cli {

class StopSignals {
 public:
  // Restores the default action of the three signals (a shell starts
  // background jobs with SIGINT ignored, and an ignored signal is discarded
  // instead of queued) and blocks them in the calling thread.
  StopSignals();

  // Waits up to `timeout` for a stop signal; its number, or 0.
  int Wait(absl::Duration timeout) const;

 private:
  sigset_t set_;
};

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_STOP_SIGNALS_H_
