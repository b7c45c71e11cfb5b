#include "apps/fashion_mnist/progress.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/format/human_bytes.h"

namespace gradwire {

Progress::Progress(std::string label, bool interactive, FILE* out,
                   absl::Duration log_interval)
    : label_(std::move(label)),
      interactive_(interactive),
      out_(out),
      interval_(interactive ? absl::Milliseconds(100) : log_interval) {}

bool Progress::StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

std::string Progress::Render(const ProgressSample& s) const {
  const double ratio =
      CompressionRatio(s.dense_equivalent_bytes, s.pushed_bytes);
  return absl::StrFormat(
      "%s epoch %d/%d step %d/%d loss %.4f %.0f samples/s sent %s of %s dense "
      "(%.0fx less)",
      label_, s.epoch + 1, s.epochs, s.step_in_epoch, s.steps_per_epoch, s.loss,
      s.samples_per_second, HumanBytes(s.pushed_bytes),
      HumanBytes(s.dense_equivalent_bytes), ratio);
}

void Progress::Update(const ProgressSample& sample) {
  const absl::Time now = absl::Now();
  const bool last = sample.step_in_epoch == sample.steps_per_epoch;
  if (now - last_draw_ < interval_ && !last) return;
  last_draw_ = now;
  if (!interactive_) {
    absl::FPrintF(out_, "%s\n", Render(sample));
    std::fflush(out_);
    return;
  }
  const int width = 24;
  const int filled = sample.steps_per_epoch == 0
                         ? 0
                         : static_cast<int>(width * sample.step_in_epoch /
                                            sample.steps_per_epoch);
  absl::FPrintF(out_, "\r\033[K[%s%s] %s", std::string(filled, '#'),
                std::string(width - filled, '.'), Render(sample));
  std::fflush(out_);
  bar_open_ = true;
}

void Progress::Line(const std::string& text) {
  if (bar_open_) absl::FPrintF(out_, "\n");
  bar_open_ = false;
  absl::FPrintF(out_, "%s %s\n", label_, text);
  std::fflush(out_);
}

}  // namespace gradwire
