// Keeps the large, short-lived buffers of a training step in the heap.
//
// Each step of a libtorch model allocates and frees activations, gradients
// and BLAS work buffers of a few MiB, and a shard allocates chunk-sized
// buffers for each update. gradwire-worker (unless --tune-heap=false),
// gradwire-server and gradwire.tune_heap() call it. glibc's malloc serves
// blocks above its mmap threshold with fresh mappings and returns the top of
// the heap to the system past its trim threshold, so every step pays page
// faults and the kernel's zeroing of the same memory again: measured on the CNN
// with OpenBLAS, two compute-only workers on 2 cores took 21-24 s for 150 steps
// with glibc's defaults and 7-8 s with both thresholds raised (raising
// only one of them is slower still: setting either stops glibc's own
// adjustment of the mmap threshold).
//
// TuneHeapForTraining raises the mmap threshold to glibc's maximum (32 MiB
// on 64-bit) and the trim threshold to kHeapTrimThresholdBytes, so that up
// to that much freed memory stays mapped for the next step. It does
// nothing where the C library is not glibc, in sanitizer builds (their
// malloc ignores mallopt; HeapTuningPossible() is false there), or where
// the process was given its own malloc settings (GLIBC_TUNABLES naming
// glibc.malloc.mmap_threshold or glibc.malloc.trim_threshold, or
// MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_): those win.
//
// Call it once, early, before the training loop; it affects the whole
// process. Thread safety: mallopt may run beside other threads' mallocs.
#ifndef GRADWIRE_COMMON_HEAP_TUNING_H_
#define GRADWIRE_COMMON_HEAP_TUNING_H_

#include <cstddef>
#include <string>

namespace gradwire {

// Freed memory kept mapped at the top of the heap before it is returned.
inline constexpr size_t kHeapTrimThresholdBytes = size_t{512} << 20;

struct HeapTuning {
  // Whether the thresholds were changed.
  bool applied = false;
  // What was done or why not, for the worker's log.
  std::string description;
};

HeapTuning TuneHeapForTraining();

// Whether TuneHeapForTraining can apply anything in this build: glibc's
// malloc, not a sanitizer's.
bool HeapTuningPossible();

// Returns the heap's free pages to the system (glibc's malloc_trim), once a
// large, one-time use is over: a worker's start-up holds the model's
// initial values encoded for the shards, a shard's the decoded parts of its
// Init, and neither is needed again; without it the process keeps their
// pages (beside everything allocated after them) for the rest of the job.
// Does nothing where HeapTuningPossible() is false. Costs a pass over the
// heap's free lists.
void ReleaseFreeHeapPages();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_HEAP_TUNING_H_
