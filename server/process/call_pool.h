// A fixed set of threads that run the work of gRPC calls, so that the
// number of threads a shard uses does not grow with the calls it receives.
//
// The callback API runs a call's handler on one of gRPC's own threads,
// which must not block. ParameterServerService hands each call's work
// (parse, validate, apply, journal, wait for a step) to a CallPool instead:
// a call that finds every thread busy waits in the queue, holding its
// received bytes but no thread. The queue is bounded: past `max_queued`
// waiting calls Submit refuses, so that a flood of calls costs the caller
// an answer instead of the shard its memory and every other call's wait.
//
//   CallPool pool("push", 4, /*max_queued=*/1024);
//   if (!pool.Submit([] { ... })) { /* full: answer RESOURCE_EXHAUSTED */ }
//   pool.Stop();               // runs what is queued, then joins
//
// Thread safety: Submit may be called from any thread, concurrently, until
// Stop; Stop is called once (the destructor calls it if needed).
#ifndef GRADWIRE_SERVER_PROCESS_CALL_POOL_H_
#define GRADWIRE_SERVER_PROCESS_CALL_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

class CallPool {
 public:
  // Starts `threads` (>= 1) threads; `name` is for logs. At most
  // `max_queued` (>= 1) calls wait in the queue; the running ones are not
  // counted.
  CallPool(std::string name, int threads,
           int64_t max_queued = std::numeric_limits<int64_t>::max());
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Queues `work` and returns true; it runs on a pool thread, in submission
  // order with respect to the other queued work (the threads take from one
  // queue). Returns false, and drops `work` unrun, when max_queued calls
  // are already waiting. After Stop, `work` runs on the calling thread
  // instead (true), so that no call is left without an answer.
  bool Submit(std::function<void()> work);

  int64_t max_queued() const { return max_queued_; }

  // Calls queued and running now (for metrics and tests).
  int64_t queued() const;
  int64_t running() const;

  // Runs everything queued, then joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  const std::string name_;
  const int64_t max_queued_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_CALL_POOL_H_
