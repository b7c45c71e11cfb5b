// A background thread that runs push jobs in the order they were handed
// over, so that compressing and pushing the gradients of parameters whose
// backward pass is done overlaps with the rest of the backward pass.
//
// ParameterSync (parameter_sync.h) hands over the chunk keys of each
// parameter as its gradient becomes final; the pipeline batches whatever
// has queued up while the previous job ran into one job call (so a burst
// of small parameters becomes one push per shard), and Drain() waits for
// the lot at the end of the step.
//
// Thread safety: Enqueue and Drain may be called from any thread; the job
// runs on the pipeline's own thread only, one call at a time.
#ifndef GRADWIRE_WORKER_PUSH_PIPELINE_H_
#define GRADWIRE_WORKER_PUSH_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gradwire {

class PushPipeline {
 public:
  // Compresses and pushes the chunks `keys` (in the order enqueued).
  using Job = std::function<absl::Status(const std::vector<uint64_t>& keys)>;

  // Starts the thread. `job` must stay callable until destruction.
  explicit PushPipeline(Job job);
  // Waits for the queued jobs, then stops the thread.
  ~PushPipeline();
  PushPipeline(const PushPipeline&) = delete;
  PushPipeline& operator=(const PushPipeline&) = delete;

  // Queues `keys` for the thread and returns at once.
  void Enqueue(absl::Span<const uint64_t> keys);

  // Blocks until every key enqueued before the call has been handled.
  // Returns the first error since the previous Drain (keys queued after an
  // error are dropped, not pushed), and clears it.
  absl::Status Drain();

 private:
  void Run();

  const Job job_;
  absl::Mutex mu_;
  std::vector<uint64_t> queued_ ABSL_GUARDED_BY(mu_);
  // True while the thread runs a job on keys taken from queued_.
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_PUSH_PIPELINE_H_
