#include "common/heap_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/strings/str_cat.h"

// Sanitizers replace malloc with their own, which ignores mallopt.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRADWIRE_SANITIZED_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GRADWIRE_SANITIZED_MALLOC 1
#endif
#endif

namespace gradwire {
namespace {

// glibc's upper bound on M_MMAP_THRESHOLD on 64-bit targets
// (DEFAULT_MMAP_THRESHOLD_MAX); mallopt refuses more.
[[maybe_unused]] constexpr int kMaxMmapThresholdBytes = 32 << 20;

// Whether the environment already sets a malloc threshold for glibc.
[[maybe_unused]] bool UserSetThresholds() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {
    return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr &&
         (std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
          std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr);
}

}  // namespace

void ReleaseFreeHeapPages() {
#if defined(__GLIBC__) && !defined(GRADWIRE_SANITIZED_MALLOC)
  malloc_trim(0);
#endif
}

bool HeapTuningPossible() {
#if defined(__GLIBC__) && !defined(GRADWIRE_SANITIZED_MALLOC)
  return true;
#else
  return false;
#endif
}

HeapTuning TuneHeapForTraining() {
  HeapTuning tuning;
#if defined(GRADWIRE_SANITIZED_MALLOC)
  tuning.description = "heap: malloc is the sanitizer's, left as it is";
#elif defined(__GLIBC__)
  if (UserSetThresholds()) {
    tuning.description = "heap: malloc thresholds from the environment";
    return tuning;
  }
  if (mallopt(M_MMAP_THRESHOLD, kMaxMmapThresholdBytes) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapTrimThresholdBytes)) !=
          1) {
    tuning.description = "heap: glibc refused the malloc thresholds";
    return tuning;
  }
  tuning.applied = true;
  tuning.description =
      absl::StrCat("heap: blocks up to ", kMaxMmapThresholdBytes >> 20,
                   " MiB from the heap, up to ", kHeapTrimThresholdBytes >> 20,
                   " MiB of freed memory kept for the next step");
#else
  tuning.description = "heap: not glibc, malloc left as it is";
#endif
  return tuning;
}

}  // namespace gradwire
