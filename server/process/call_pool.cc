#include "server/process/call_pool.h"

#include <algorithm>
#include <utility>

namespace gradwire {

CallPool::CallPool(std::string name, int threads, int64_t max_queued)
    : name_(std::move(name)), max_queued_(std::max<int64_t>(1, max_queued)) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

CallPool::~CallPool() { Stop(); }

bool CallPool::Submit(std::function<void()> work) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      if (static_cast<int64_t>(queue_.size()) >= max_queued_) return false;
      queue_.push_back(std::move(work));
      return true;
    }
  }
  work();
  return true;
}

int64_t CallPool::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t CallPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

void CallPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void CallPool::Run() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CallPool* pool) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return pool->stopping_ || !pool->queue_.empty();
          },
          this));
      // Stopping still drains the queue: every queued call is answered.
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    work();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace gradwire
