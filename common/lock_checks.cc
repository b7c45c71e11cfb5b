#include "common/lock_checks.h"

#include "absl/synchronization/mutex.h"

namespace gradwire {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace gradwire
