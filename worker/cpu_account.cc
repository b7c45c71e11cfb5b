#include "worker/cpu_account.h"

#include <time.h>

namespace gradwire {
namespace {

// Ids of accounts, so that a thread's cached bucket is never taken for one
// of a later account at the same address.
std::atomic<uint64_t> next_account_id{1};

// The innermost scope open on this thread, and the bucket this thread used
// last (with its account's id).
thread_local CpuAccount::Scope* innermost_scope = nullptr;
thread_local uint64_t cached_account_id = 0;
thread_local void* cached_bucket = nullptr;

int64_t ClockNanos(clockid_t clock) {
  timespec now;
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace

const char* CpuActivityName(CpuActivity activity) {
  static constexpr const char* kNames[kNumCpuActivities] = {
      "compress", "momentum", "encode", "rpc", "decode", "copy", "sync_other"};
  return kNames[static_cast<int>(activity)];
}

double CpuTotals::communication() const {
  double sum = other_threads;
  for (double seconds : activity) sum += seconds;
  return sum;
}

int64_t CpuAccount::ThreadCpuNanos() {
  return ClockNanos(CLOCK_THREAD_CPUTIME_ID);
}

int64_t CpuAccount::ProcessCpuNanos() {
  return ClockNanos(CLOCK_PROCESS_CPUTIME_ID);
}

CpuAccount::Scope::Scope(CpuAccount* account, CpuActivity activity)
    : account_(account), activity_(activity) {
  if (account_ == nullptr) return;
  parent_ = innermost_scope;
  innermost_scope = this;
  start_ns_ = ThreadCpuNanos();
}

CpuAccount::Scope::~Scope() {
  if (account_ == nullptr) return;
  const int64_t elapsed = ThreadCpuNanos() - start_ns_;
  innermost_scope = parent_;
  if (parent_ != nullptr) parent_->nested_ns_ += elapsed;
  account_->Add(activity_, elapsed - nested_ns_);
}

int64_t CpuAccount::Bucket::SumNanos() const {
  int64_t sum = 0;
  for (const auto& n : ns) sum += n.load(std::memory_order_relaxed);
  return sum;
}

CpuAccount::CpuAccount() : id_(next_account_id.fetch_add(1)) {}

CpuAccount::~CpuAccount() = default;

CpuAccount::Bucket* CpuAccount::ThisThreadBucket() {
  if (cached_account_id == id_) return static_cast<Bucket*>(cached_bucket);
  // A thread's first scope of this account (or one after a scope of
  // another account: only tests use several).
  static thread_local std::vector<std::pair<uint64_t, Bucket*>> known;
  Bucket* bucket = nullptr;
  for (const auto& [id, b] : known) {
    if (id == id_) bucket = b;
  }
  if (bucket == nullptr) {
    absl::MutexLock lock(&mu_);
    buckets_.push_back(std::make_unique<Bucket>());
    bucket = buckets_.back().get();
    known.emplace_back(id_, bucket);
  }
  cached_account_id = id_;
  cached_bucket = bucket;
  return bucket;
}

void CpuAccount::Add(CpuActivity activity, int64_t ns) {
  if (!started_.load(std::memory_order_relaxed)) return;
  Bucket* bucket = ThisThreadBucket();
  // Only this thread writes its bucket: a load and a store, no locked
  // read-modify-write.
  std::atomic<int64_t>& sum = bucket->ns[static_cast<int>(activity)];
  sum.store(sum.load(std::memory_order_relaxed) + ns,
            std::memory_order_relaxed);
  bucket->scopes.store(bucket->scopes.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
}

int64_t CpuAccount::AllScopedNanos() const {
  absl::MutexLock lock(&mu_);
  int64_t sum = 0;
  for (const auto& bucket : buckets_) sum += bucket->SumNanos();
  return sum;
}

void CpuAccount::StartSteps() {
  last_thread_ns_ = ThreadCpuNanos();
  last_process_ns_ = ProcessCpuNanos();
  started_.store(true, std::memory_order_relaxed);
  last_own_scoped_ns_ = ThisThreadBucket()->SumNanos();
  last_all_scoped_ns_ = AllScopedNanos();
}

void CpuAccount::EndStep() {
  const int64_t thread_ns = ThreadCpuNanos();
  const int64_t process_ns = ProcessCpuNanos();
  const int64_t own_scoped = ThisThreadBucket()->SumNanos();
  const int64_t all_scoped = AllScopedNanos();
  const int64_t thread_delta = thread_ns - last_thread_ns_;
  const int64_t own_delta = own_scoped - last_own_scoped_ns_;
  const int64_t others_scoped_delta =
      (all_scoped - own_scoped) - (last_all_scoped_ns_ - last_own_scoped_ns_);
  compute_ns_.fetch_add(thread_delta - own_delta, std::memory_order_relaxed);
  // A scope still open on another thread shows here now and in its
  // activity later: the two even out over steps.
  other_threads_ns_.fetch_add(
      (process_ns - last_process_ns_) - thread_delta - others_scoped_delta,
      std::memory_order_relaxed);
  steps_.fetch_add(1, std::memory_order_relaxed);
  last_thread_ns_ = thread_ns;
  last_process_ns_ = process_ns;
  last_own_scoped_ns_ = own_scoped;
  last_all_scoped_ns_ = all_scoped;
}

CpuTotals CpuAccount::Totals() const {
  CpuTotals totals;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& bucket : buckets_) {
      for (int a = 0; a < kNumCpuActivities; ++a) {
        totals.activity[a] +=
            Seconds(bucket->ns[a].load(std::memory_order_relaxed));
      }
      totals.scopes += bucket->scopes.load(std::memory_order_relaxed);
    }
  }
  totals.steps = steps_.load(std::memory_order_relaxed);
  totals.compute = Seconds(compute_ns_.load(std::memory_order_relaxed));
  totals.other_threads =
      Seconds(other_threads_ns_.load(std::memory_order_relaxed));
  return totals;
}

}  // namespace gradwire
