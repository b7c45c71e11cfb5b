#include "worker/push_pipeline.h"

#include <utility>

namespace gradwire {

PushPipeline::PushPipeline(Job job)
    : job_(std::move(job)), thread_([this] { Run(); }) {}

PushPipeline::~PushPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void PushPipeline::Enqueue(absl::Span<const uint64_t> keys) {
  absl::MutexLock lock(&mu_);
  queued_.insert(queued_.end(), keys.begin(), keys.end());
}

absl::Status PushPipeline::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PushPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->queued_.empty() && !p->busy_;
      },
      this));
  return std::exchange(first_error_, absl::OkStatus());
}

void PushPipeline::Run() {
  std::vector<uint64_t> keys;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      mu_.Await(absl::Condition(
          +[](PushPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return !p->queued_.empty() || p->stopping_;
          },
          this));
      // The destructor waits for queued work: stop only when none is left.
      if (queued_.empty()) return;
      keys.swap(queued_);
      queued_.clear();
      if (!first_error_.ok()) continue;  // Dropped: the step already failed.
      busy_ = true;
    }
    absl::Status status = job_(keys);
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      if (first_error_.ok()) first_error_ = std::move(status);
    }
  }
}

}  // namespace gradwire
