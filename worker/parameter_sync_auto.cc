// ParameterSync's part in compressor "auto" (auto_compression.h): the
// timings and transfers it notes for the chooser, and the start of each
// step's pushes, where the chooser decides.
#include "absl/time/clock.h"
#include "worker/parameter_sync.h"
#include "worker/push_request_builder.h"

namespace gradwire {
namespace {

// Without overlap the backward pass is not seen apart from the forward
// pass: it is taken as this share of the computation (it does about twice
// the forward pass's work).
constexpr double kBackwardShare = 2.0 / 3.0;

}  // namespace

const AutoCompressionReport* ParameterSync::auto_compression() const {
  const AutoCompression* chooser = push_builder_->auto_compression();
  return chooser == nullptr ? nullptr : &chooser->report();
}

void ParameterSync::BeginPushes() {
  push_builder_->BeginStep(
      step_, ScheduledLearningRate(options_.training.optimizer(), step_));
}

void ParameterSync::NoteCompute(absl::Time step_start) {
  AutoCompression* chooser = push_builder_->auto_compression();
  if (chooser == nullptr || last_step_end_ == absl::InfinitePast()) return;
  const double compute = absl::ToDoubleSeconds(step_start - last_step_end_);
  // With overlap the backward pass runs from the first announced gradient
  // (the last layer's) to Step().
  const double backward =
      step_announced_ && first_announced_at_ > last_step_end_
          ? absl::ToDoubleSeconds(step_start - first_announced_at_)
          : compute * kBackwardShare;
  chooser->NoteCompute(compute, backward);
  const CpuTotals cpu = cpu_account_.Totals();
  chooser->NoteCpu(
      cpu.compute,
      cpu.of(CpuActivity::kEncode) + cpu.of(CpuActivity::kRpc) +
          cpu.of(CpuActivity::kDecode),
      static_cast<double>(stats_.pushed_bytes + stats_.pulled_bytes));
}

void ParameterSync::NoteTransfer(uint64_t bytes, double seconds) {
  AutoCompression* chooser = push_builder_->auto_compression();
  if (chooser != nullptr) chooser->ObserveTransfer(bytes, seconds);
}

void ParameterSync::NoteWireRatio(const SyncStats& before) {
  AutoCompression* chooser = push_builder_->auto_compression();
  if (chooser == nullptr || !step_wire_bytes_.known) return;
  const double payload =
      static_cast<double>(stats_.pushed_bytes - before.pushed_bytes) +
      static_cast<double>(stats_.pulled_bytes - before.pulled_bytes);
  if (payload <= 0) return;
  // The link carries every segment's IP and TCP headers too, pure
  // acknowledgements included: they cost time as the stream bytes do, and
  // their share grows as compression shrinks the pushes. Without segment
  // counts, the stream bytes alone.
  const WireTotals& wire = step_wire_bytes_;
  const uint64_t bytes = wire.headers_known
                             ? wire.packet_sent() + wire.packet_received()
                             : wire.sent + wire.received;
  chooser->NoteWireRatio(static_cast<double>(bytes) / payload);
}

}  // namespace gradwire
