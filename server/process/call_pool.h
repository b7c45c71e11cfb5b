// A fixed set of threads that run the work of gRPC calls, so that the
// number of threads a shard uses does not grow with the calls it receives.
//
// The callback API runs a call's handler on one of gRPC's own threads,
// which must not block. ParameterServerService hands each call's work
// (parse, validate, apply, journal, wait for a step) to a CallPool instead:
// a call that finds every thread busy waits in the queue, holding its
// received bytes but no thread.
//
//   CallPool pool("push", 4);
//   pool.Submit([] { ... });   // runs on one of the 4 threads
//   pool.Stop();               // runs what is queued, then joins
//
// Thread safety: Submit may be called from any thread, concurrently, until
// Stop; Stop is called once (the destructor calls it if needed).
#ifndef GRADWIRE_SERVER_PROCESS_CALL_POOL_H_
#define GRADWIRE_SERVER_PROCESS_CALL_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

class CallPool {
 public:
  // Starts `threads` (>= 1) threads; `name` is for logs.
  CallPool(std::string name, int threads);
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Queues `work`; it runs on a pool thread, in submission order with
  // respect to the other queued work (the threads take from one queue).
  // After Stop, `work` runs on the calling thread instead, so that no call
  // is left without an answer.
  void Submit(std::function<void()> work);

  // Calls queued and running now (for metrics and tests).
  int64_t queued() const;
  int64_t running() const;

  // Runs everything queued, then joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_CALL_POOL_H_
