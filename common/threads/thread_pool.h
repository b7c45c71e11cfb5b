// The thread pool of gradwire: threads that take work from one queue. Every
// part that runs work on threads of its own uses it:
//
//  - a shard runs the work of gRPC calls on two fixed pools with bounded
//    queues (server/process/parameter_server_service.h): the callback API
//    runs a handler on one of gRPC's threads, which must not block, so the
//    call's work (parse, validate, apply, journal, wait for a step) is
//    submitted here instead. A call that finds every thread busy waits in
//    the queue, holding its received bytes but no thread; past
//    `max_queued` waiting calls Submit refuses, so that a flood of calls
//    costs the caller an answer instead of the shard its memory.
//
//      ThreadPoolOptions options;
//      options.threads = 4;
//      options.max_queued = 1024;
//      ThreadPool pool(options);
//      if (!pool.Submit([] { ... })) { /* full: RESOURCE_EXHAUSTED */ }
//      pool.Stop();  // runs what is queued, then joins
//
//  - a worker compresses the chunks of a push in parallel (ParallelFor;
//    the caller works too, so a pool of N threads compresses on N + 1);
//
//      pool.ParallelFor(keys.size(), [&](size_t i) { Compress(keys[i]); });
//
//  - a client calls its shards in parallel on a pool that grows
//    (`grow_when_busy`): a Pull that waits for its step holds its thread
//    for as long as it waits, so a task must find a thread of its own
//    rather than wait behind it. Threads are kept across calls, so a steady
//    stream of pushes and pulls starts none (a thread per shard and call
//    cost a clone, a stack and an exit each time); the pool grows to the
//    most tasks ever in flight at once.
//
// Thread safety: every method may be called from any thread, concurrently;
// Submit and ParallelFor also after Stop (the work then runs in the caller).
#ifndef GRADWIRE_COMMON_THREADS_THREAD_POOL_H_
#define GRADWIRE_COMMON_THREADS_THREAD_POOL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

struct ThreadPoolOptions {
  // Threads started by the constructor (>= 0; a negative count is 0). With
  // none, and not growing, ParallelFor runs everything in the caller.
  int threads = 1;
  // Whether Submit starts another thread whenever work is queued and no
  // thread is idle. Threads never exit before Stop, so the pool keeps the
  // most threads it ever needed at once.
  bool grow_when_busy = false;
  // At most this many pieces of work wait in the queue (>= 1; less is 1);
  // the running ones are not counted.
  int64_t max_queued = std::numeric_limits<int64_t>::max();
};

class ThreadPool {
 public:
  // Starts options.threads threads.
  explicit ThreadPool(const ThreadPoolOptions& options);
  // Stop().
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `work` and returns true; it runs on a pool thread, in
  // submission order with respect to the other queued work (the threads
  // take from one queue). Returns false, and drops `work` unrun, when
  // max_queued pieces are already waiting. After Stop, when the pool has
  // no thread, or when a growing pool has none idle and cannot start one,
  // `work` runs on the calling thread instead (true), so that no call is
  // left without an answer and none waits behind a blocked one.
  bool Submit(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs task(i) for every i in [0, count), each exactly once, and returns
  // when every task has returned; task(0) runs in the calling thread.
  //  - Fixed pool: up to threads() helpers are queued, and they and the
  //    caller take the task indices as they come free (tasks of similar,
  //    short length: compression). The caller waits only for helpers that
  //    have started, so a task may itself call ParallelFor on the pool,
  //    and a full queue only leaves more tasks to the caller.
  //  - Growing pool: every task but task(0) is queued on its own and gets
  //    a thread of its own (tasks that may block for long: calls to
  //    shards). A task that cannot be queued, or finds no thread, runs in
  //    the caller after task(0).
  void ParallelFor(size_t count, absl::FunctionRef<void(size_t)> task)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started so far.
  int threads() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t max_queued() const { return max_queued_; }
  // Pieces of work queued and running now (for metrics and tests).
  int64_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t running() const ABSL_LOCKS_EXCLUDED(mu_);

  // Runs everything queued, then joins the threads. Idempotent; a second
  // call returns at once.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Batch;

  // ParallelFor on a growing pool.
  void RunEach(size_t count, absl::FunctionRef<void(size_t)> task)
      ABSL_LOCKS_EXCLUDED(mu_);
  enum class Queued { kYes, kFull, kNoThread };

  // Moves *work into the queue unless max_queued pieces wait; when growing
  // and no thread is idle, starts one first. kNoThread (*work left as it
  // was): the pool has no thread, or growing, it could start none.
  Queued Enqueue(std::function<void()>* work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const bool grow_when_busy_;
  const int64_t max_queued_;

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  // Threads waiting for work, and threads running some.
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Started so far; Stop takes the threads to join but not the count.
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_THREADS_THREAD_POOL_H_
