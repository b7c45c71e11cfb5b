// Training progress on a terminal: a live one-line bar when stdout is a TTY,
// plain log lines (at most one every few seconds) otherwise.
#ifndef GRADWIRE_APPS_FASHION_MNIST_PROGRESS_H_
#define GRADWIRE_APPS_FASHION_MNIST_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace gradwire {

struct ProgressSample {
  int epoch = 0;
  int epochs = 1;
  uint64_t step_in_epoch = 0;
  uint64_t steps_per_epoch = 0;
  uint64_t global_step = 0;
  double loss = 0;
  double samples_per_second = 0;
  uint64_t pushed_bytes = 0;
  uint64_t dense_equivalent_bytes = 0;
};

class Progress {
 public:
  // `label` prefixes every line (e.g. "worker 0"). `interactive`: draw a bar
  // that rewrites itself; otherwise print a line every `log_interval`.
  Progress(std::string label, bool interactive, FILE* out = stdout,
           absl::Duration log_interval = absl::Seconds(5));

  // True when stdout is a terminal.
  static bool StdoutIsTerminal();

  // Records a step; redraws at most ten times a second.
  void Update(const ProgressSample& sample);
  // Prints a line of its own (ending the bar's line first).
  void Line(const std::string& text);

 private:
  std::string Render(const ProgressSample& sample) const;

  const std::string label_;
  const bool interactive_;
  FILE* const out_;
  const absl::Duration interval_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool bar_open_ = false;
};

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_PROGRESS_H_
