#include "client/call_threads.h"

#include <system_error>
#include <utility>

#include "absl/synchronization/blocking_counter.h"

namespace gradwire {

CallThreads::~CallThreads() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void CallThreads::Run(size_t count, absl::FunctionRef<void(size_t)> task) {
  if (count == 0) return;
  absl::BlockingCounter done(static_cast<int>(count - 1));
  std::vector<size_t> inline_tasks;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 1; i < count; ++i) {
      queue_.push_back([&task, &done, i] {
        task(i);
        done.DecrementCount();
      });
      if (queue_.size() <= idle_) continue;  // An idle thread will take it.
      try {
        threads_.emplace_back([this] { Loop(); });
      } catch (const std::system_error&) {
        // No thread to be had: this task runs here. The lock is held, so
        // it is still the last one queued.
        queue_.pop_back();
        inline_tasks.push_back(i);
      }
    }
  }
  task(0);
  for (const size_t i : inline_tasks) {
    task(i);
    done.DecrementCount();
  }
  done.Wait();
}

size_t CallThreads::threads_started() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

bool CallThreads::HasWork() const { return !queue_.empty() || stopping_; }

void CallThreads::Loop() {
  mu_.Lock();
  while (true) {
    ++idle_;
    mu_.Await(absl::Condition(this, &CallThreads::HasWork));
    --idle_;
    if (queue_.empty()) break;  // Stopping, and nothing left to run.
    std::function<void()> next = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    next();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace gradwire
