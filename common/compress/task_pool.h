// A fixed set of threads that runs batches of independent tasks: the
// worker compresses the chunks of a push on it, one task per chunk.
//
//   TaskPool pool(CoresOfThisProcess());
//   pool.Run(keys.size(), [&](size_t i) { Compress(keys[i]); });
//
// Thread safety: Run may be called from any thread; calls are serialised
// (one batch at a time). The calling thread works on its own batch, so a
// pool of 1 thread starts none and runs every task in the caller.
#ifndef GRADWIRE_COMMON_COMPRESS_TASK_POOL_H_
#define GRADWIRE_COMMON_COMPRESS_TASK_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

class TaskPool {
 public:
  // `threads` >= 1 threads in all, the caller of Run among them.
  explicit TaskPool(int threads);
  // Stops the threads (no batch may be running).
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, count), each exactly once, in any order
  // and on any of the threads; returns when all have returned. Tasks must
  // not call Run.
  void Run(size_t count, absl::FunctionRef<void(size_t)> task)
      ABSL_LOCKS_EXCLUDED(run_mu_, mu_);

 private:
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes and runs tasks of the current batch until none is left.
  void Drain(absl::FunctionRef<void(size_t)> task, size_t count);

  // Held for a whole Run: one batch at a time.
  absl::Mutex run_mu_;
  absl::Mutex mu_;
  // The batch: set by Run, read by the workers when `batch_` changes.
  absl::FunctionRef<void(size_t)>* task_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t batch_ ABSL_GUARDED_BY(mu_) = 0;
  // Workers still inside the current batch.
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The next task index to hand out.
  std::atomic<size_t> next_{0};
  std::vector<std::thread> workers_;
};

// The number of cores this process may run on (its CPU affinity), at
// least 1.
int CoresOfThisProcess();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_TASK_POOL_H_
