// Whether training is in a critical phase, where compressing gradients
// costs accuracy that later steps do not win back (Accordion: Agarwal et
// al., MLSys 2021): the first steps, the steps after a drop of the
// learning rate, and the steps after the gradient's norm changed sharply.
//
// Accordion's rule: the gradient norm is summed over intervals of
// `interval` steps; when an interval's sum differs from the previous one by
// at least `threshold` of the previous, the next interval is critical.
// The first `warmup_steps` steps are critical, and so is the interval after
// the learning rate falls below `drop` times its previous value.
//
// Thread safety: not thread-safe; one training loop drives it.
#ifndef GRADWIRE_COMMON_COMPRESS_AUTO_CRITICAL_PHASE_H_
#define GRADWIRE_COMMON_COMPRESS_AUTO_CRITICAL_PHASE_H_

#include <cstdint>

namespace gradwire {

struct CriticalPhaseOptions {
  uint64_t warmup_steps = 20;
  uint64_t interval = 10;
  // Accordion's eta.
  double threshold = 0.5;
  // A learning rate below drop * the previous one is a drop.
  double drop = 0.9;
};

class CriticalPhaseDetector {
 public:
  explicit CriticalPhaseDetector(CriticalPhaseOptions options = {})
      : options_(options) {}

  // Step `step`'s gradient norm (over the whole model) and learning rate
  // (0: unknown); steps come in increasing order. Returns whether the
  // step after it is critical.
  bool Observe(uint64_t step, double gradient_norm, double learning_rate);

  bool critical() const { return critical_; }

 private:
  const CriticalPhaseOptions options_;
  bool critical_ = true;
  // Norm sums of the interval under way and of the last finished one
  // (negative: none yet).
  double interval_sum_ = 0;
  uint64_t interval_steps_ = 0;
  double previous_sum_ = -1;
  double previous_lr_ = 0;
  // The step before which the phase stays critical.
  uint64_t critical_until_ = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_AUTO_CRITICAL_PHASE_H_
