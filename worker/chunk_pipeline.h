// A background thread that runs jobs on chunk keys in the order they were
// handed over, so that a step's communication overlaps with the training
// thread's computation.
//
// ParameterSync (parameter_sync.h) runs two: one compresses and pushes the
// chunks of each parameter as backward() finishes its gradient, the other
// pulls the new weights of the chunks pushed, so that the next forward pass
// waits only for the layers it reaches (Await). The pipeline batches
// whatever has queued up while the previous job ran into one job call (so a
// burst of small parameters becomes one request per shard); Drain() waits
// for the lot.
//
// With a minimum batch (min_batch_bytes > 0), the thread also waits until
// the queued keys weigh at least that much (the bytes given to Enqueue), as
// DDP fills a bucket: a push of a few small gradients costs a request per
// shard each way while carrying almost nothing. Whatever is queued goes at
// once while a caller waits in Await or Drain, and when the pipeline stops,
// so no key waits for a batch that will never fill.
//
// Thread safety: Enqueue, Await and Drain may be called from any thread;
// the job runs on the pipeline's own thread only, one call at a time.
#ifndef GRADWIRE_WORKER_CHUNK_PIPELINE_H_
#define GRADWIRE_WORKER_CHUNK_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gradwire {

class ChunkPipeline {
 public:
  // Handles the chunks `keys` (in the order enqueued).
  using Job = std::function<absl::Status(const std::vector<uint64_t>& keys)>;

  // Starts the thread. `job` must stay callable until destruction.
  // min_batch_bytes: see above; 0 hands over whatever is queued.
  explicit ChunkPipeline(Job job, uint64_t min_batch_bytes = 0);
  // Waits for the queued jobs, then stops the thread.
  ~ChunkPipeline();
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  // Queues `keys`, weighing `bytes` towards the minimum batch, for the
  // thread and returns at once.
  void Enqueue(absl::Span<const uint64_t> keys, uint64_t bytes = 0);

  // Blocks until no key of `keys` is queued or being handled (a key never
  // enqueued is not waited for), or until a job has failed. Returns the
  // first error since the previous Drain without clearing it: Drain
  // reports it again.
  absl::Status Await(absl::Span<const uint64_t> keys);

  // Blocks until every key enqueued before the call has been handled.
  // Returns the first error since the previous Drain (keys queued after an
  // error are dropped, not handled), and clears it.
  absl::Status Drain();

 private:
  void Run();
  // Whether the thread should take the queue now.
  bool BatchReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `keys` as handled (or dropped).
  void Settle(const std::vector<uint64_t>& keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Job job_;
  const uint64_t min_batch_bytes_;
  absl::Mutex mu_;
  std::vector<uint64_t> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Callers blocked in Await or Drain: while there are any, batches go out
  // whatever they weigh.
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  // Per key, how many of its enqueued copies are not handled yet; keys at
  // zero are erased.
  absl::flat_hash_map<uint64_t, int> unsettled_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_CHUNK_PIPELINE_H_
