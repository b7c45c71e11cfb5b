// Threads for the calls a client makes to several shards at once.
//
//   CallThreads threads;
//   threads.Run(shards.size(), [&](size_t i) { results[i] = Call(shards[i]);
//   });
//
// Run hands every task but the first to a thread kept from earlier calls
// and runs the first in the caller, so a steady stream of pushes and pulls
// starts no threads (starting a thread per shard and call cost a clone, a
// stack and an exit each time). A new thread starts only when no kept one
// is idle: a Pull that waits for its step holds its thread for as long as
// it waits, so tasks never wait for each other, and the set grows to the
// most tasks ever in flight at once (a few per shard for a worker's push
// and pull threads).
//
// Thread safety: Run may be called from any number of threads at once.
#ifndef GRADWIRE_CLIENT_CALL_THREADS_H_
#define GRADWIRE_CLIENT_CALL_THREADS_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

class CallThreads {
 public:
  CallThreads() = default;
  // Stops and joins the threads; no Run may be in progress.
  ~CallThreads();
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  // Runs task(i) for every i in [0, count), each once, task(0) in the
  // calling thread, and returns when all have returned. Where no thread can
  // be started, the caller runs that task too.
  void Run(size_t count, absl::FunctionRef<void(size_t)> task)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started so far (for tests).
  size_t threads_started() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  // Threads waiting for a task.
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_CLIENT_CALL_THREADS_H_
