#include "common/compress/task_pool.h"

#include <algorithm>

#include "common/usable_cpus.h"

namespace gradwire {

TaskPool::TaskPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

TaskPool::~TaskPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void TaskPool::Run(size_t count, absl::FunctionRef<void(size_t)> task) {
  absl::MutexLock run_lock(&run_mu_);
  if (workers_.empty() || count <= 1) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    next_.store(0, std::memory_order_relaxed);
    task_ = &task;
    count_ = count;
    busy_ = static_cast<int>(workers_.size());
    ++batch_;
  }
  Drain(task, count);
  // The workers hold a pointer to `task`: wait until every one has left.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* busy) { return *busy == 0; }, &busy_));
  task_ = nullptr;
}

void TaskPool::Drain(absl::FunctionRef<void(size_t)> task, size_t count) {
  for (size_t i = next_.fetch_add(1, std::memory_order_relaxed); i < count;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    task(i);
  }
}

void TaskPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    absl::FunctionRef<void(size_t)>* task;
    size_t count;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || batch_ != seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      seen = batch_;
      task = task_;
      count = count_;
    }
    Drain(*task, count);
    absl::MutexLock lock(&mu_);
    --busy_;
  }
}

// The affinity mask capped by the cgroup's CPU quota: in a container, the
// CPUs the quota pays for, not the host's.
int CoresOfThisProcess() { return UsableCpus(); }

}  // namespace gradwire
