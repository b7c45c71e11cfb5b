#include "worker/chunk_pipeline.h"

#include <utility>

namespace gradwire {

ChunkPipeline::ChunkPipeline(Job job, uint64_t min_batch_bytes)
    : job_(std::move(job)),
      min_batch_bytes_(min_batch_bytes),
      thread_([this] { Run(); }) {}

ChunkPipeline::~ChunkPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ChunkPipeline::Enqueue(absl::Span<const uint64_t> keys, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  queued_.insert(queued_.end(), keys.begin(), keys.end());
  queued_bytes_ += bytes;
  for (const uint64_t key : keys) ++unsettled_[key];
}

absl::Status ChunkPipeline::Await(absl::Span<const uint64_t> keys) {
  struct Wait {
    ChunkPipeline* pipeline;
    absl::Span<const uint64_t> keys;
    bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipeline->mu_) {
      if (!pipeline->first_error_.ok()) return true;
      for (const uint64_t key : keys) {
        if (pipeline->unsettled_.contains(key)) return false;
      }
      return true;
    }
  };
  Wait wait{this, keys};
  absl::MutexLock lock(&mu_);
  ++waiters_;
  mu_.Await(absl::Condition(&wait, &Wait::Done));
  --waiters_;
  return first_error_;
}

absl::Status ChunkPipeline::Drain() {
  absl::MutexLock lock(&mu_);
  ++waiters_;
  mu_.Await(absl::Condition(
      +[](ChunkPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->unsettled_.empty();
      },
      this));
  --waiters_;
  return std::exchange(first_error_, absl::OkStatus());
}

void ChunkPipeline::Settle(const std::vector<uint64_t>& keys) {
  for (const uint64_t key : keys) {
    auto it = unsettled_.find(key);
    if (--it->second == 0) unsettled_.erase(it);
  }
}

bool ChunkPipeline::BatchReady() const {
  if (stopping_) return true;
  if (queued_.empty()) return false;
  return queued_bytes_ >= min_batch_bytes_ || waiters_ > 0;
}

void ChunkPipeline::Run() {
  std::vector<uint64_t> keys;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      Settle(keys);
      keys.clear();
      mu_.Await(absl::Condition(this, &ChunkPipeline::BatchReady));
      // The destructor waits for queued work: stop only when none is left.
      if (queued_.empty()) return;
      keys.swap(queued_);
      queued_bytes_ = 0;
      if (!first_error_.ok()) continue;  // Dropped: the step already failed.
    }
    absl::Status status = job_(keys);
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      if (first_error_.ok()) first_error_ = std::move(status);
    }
  }
}

}  // namespace gradwire
