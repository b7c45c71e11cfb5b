#include "common/threads/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/synchronization/blocking_counter.h"

namespace gradwire {

// One ParallelFor: the caller and the helpers it queued take task indices
// from `next`. It is shared with the helpers, because a helper may start
// after the caller has returned; by then `closed` is set and the helper
// leaves without touching `task`, which refers to the caller's frame.
struct ThreadPool::Batch {
  Batch(size_t count, absl::FunctionRef<void(size_t)> task)
      : count(count), task(task) {}

  // Runs the tasks no one has taken yet.
  void Drain() {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      task(i);
    }
  }

  // What a queued helper does on a pool thread.
  void Help() {
    {
      absl::MutexLock lock(&mu);
      if (closed) return;
      ++helping;
    }
    Drain();
    absl::MutexLock lock(&mu);
    --helping;
  }

  const size_t count;
  const absl::FunctionRef<void(size_t)> task;
  // Task 0 is the caller's.
  std::atomic<size_t> next{1};
  absl::Mutex mu;
  // Helpers inside Drain; the caller returns when none is.
  int helping ABSL_GUARDED_BY(mu) = 0;
  // Set by the caller once every task is taken: later helpers do nothing.
  bool closed ABSL_GUARDED_BY(mu) = false;
};

ThreadPool::ThreadPool(const ThreadPoolOptions& options)
    : grow_when_busy_(options.grow_when_busy),
      max_queued_(std::max<int64_t>(1, options.max_queued)) {
  absl::MutexLock lock(&mu_);
  threads_.reserve(std::max(0, options.threads));
  for (int i = 0; i < options.threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    ++started_;
  }
}

ThreadPool::~ThreadPool() { Stop(); }

ThreadPool::Queued ThreadPool::Enqueue(std::function<void()>* work) {
  if (static_cast<int64_t>(queue_.size()) >= max_queued_) return Queued::kFull;
  if (grow_when_busy_ && queue_.size() >= static_cast<size_t>(idle_)) {
    try {
      threads_.emplace_back([this] { Loop(); });
      ++started_;
    } catch (const std::system_error&) {
      // The work must not wait for a busy thread, which may be blocked.
      return Queued::kNoThread;
    }
  }
  if (started_ == 0) return Queued::kNoThread;
  queue_.push_back(std::move(*work));
  return Queued::kYes;
}

bool ThreadPool::Submit(std::function<void()> work) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      switch (Enqueue(&work)) {
        case Queued::kYes:
          return true;
        case Queued::kFull:
          return false;
        case Queued::kNoThread:
          break;
      }
    }
  }
  work();
  return true;
}

void ThreadPool::ParallelFor(size_t count,
                             absl::FunctionRef<void(size_t)> task) {
  if (count == 0) return;
  if (grow_when_busy_) return RunEach(count, task);
  std::shared_ptr<Batch> batch;
  if (count > 1) {
    absl::MutexLock lock(&mu_);
    const size_t helpers =
        stopping_ ? 0 : std::min(count - 1, static_cast<size_t>(started_));
    if (helpers > 0) batch = std::make_shared<Batch>(count, task);
    for (size_t h = 0; h < helpers; ++h) {
      std::function<void()> help = [batch] { batch->Help(); };
      if (Enqueue(&help) != Queued::kYes) break;
    }
  }
  task(0);
  if (batch == nullptr) {
    for (size_t i = 1; i < count; ++i) task(i);
    return;
  }
  batch->Drain();
  absl::MutexLock lock(&batch->mu);
  batch->closed = true;
  batch->mu.Await(absl::Condition(
      +[](int* helping) { return *helping == 0; }, &batch->helping));
}

void ThreadPool::RunEach(size_t count, absl::FunctionRef<void(size_t)> task) {
  absl::BlockingCounter done(static_cast<int>(count - 1));
  std::vector<size_t> inline_tasks;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 1; i < count; ++i) {
      std::function<void()> run = [&task, &done, i] {
        task(i);
        done.DecrementCount();
      };
      if (stopping_ || Enqueue(&run) != Queued::kYes) inline_tasks.push_back(i);
    }
  }
  task(0);
  for (const size_t i : inline_tasks) {
    task(i);
    done.DecrementCount();
  }
  done.Wait();
}

int ThreadPool::threads() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

int64_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t ThreadPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

void ThreadPool::Stop() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    threads.swap(threads_);
  }
  // Work is queued only while a thread exists, and the threads drain the
  // queue before they leave.
  for (std::thread& thread : threads) thread.join();
}

bool ThreadPool::HasWork() const { return stopping_ || !queue_.empty(); }

void ThreadPool::Loop() {
  mu_.Lock();
  while (true) {
    ++idle_;
    mu_.Await(absl::Condition(this, &ThreadPool::HasWork));
    --idle_;
    // Stopping still drains the queue: every queued call is answered.
    if (queue_.empty()) break;
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    work();
    // Its captures (a call's buffers, a batch) are released without the
    // lock too.
    work = nullptr;
    mu_.Lock();
    --running_;
  }
  mu_.Unlock();
}

}  // namespace gradwire
