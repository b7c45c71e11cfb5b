// A per-step account of the CPU a worker spends on communication, beside
// the CPU its training loop spends on computing.
//
// Communication code marks what it does with a Scope:
//
//   { CpuAccount::Scope scope(account, CpuActivity::kEncode);
//     EncodeChunk(...); }
//
// which adds the CPU time of the calling thread inside it
// (CLOCK_THREAD_CPUTIME_ID: time on the CPU, not waiting) to the activity.
// Scopes nest: an inner scope's time counts for the inner activity only, and
// the outer one gets what is left (no time is counted twice). Each thread
// adds to a bucket of its own (no lock, no shared cache line); the buckets
// are merged when totals are read.
//
// The training thread calls EndStep() after each step; the account then
// splits the CPU the process used since the previous EndStep() (or
// StartSteps()):
//   compute        the training thread's CPU outside every scope: forward,
//                  backward, the loss, the loop's own work;
//   activities     what the scopes of every thread counted;
//   other_threads  the rest of the process's CPU: threads that entered no
//                  scope (gRPC's completion-queue and timer threads, the
//                  client's call threads for the second and further
//                  shards, the kernel's socket work done on them, torch's
//                  intra-op threads when there are any) and the time the
//                  pipeline and pool threads spent outside their scopes.
// Not counted: CPU before StartSteps() (data loading, Register) and kernel
// work done in softirq context on behalf of no thread of this process.
//
// Cost: two clock_gettime calls per scope (a system call each, about
// 0.2-0.5 us), and at EndStep() one more per thread that entered a scope.
//
// Thread safety: Scope may be entered on any thread, concurrently; Totals()
// may be called from any thread (a step in progress shows in part).
// StartSteps() and EndStep() must be called from one thread, the training
// thread. The account must outlive its scopes; a thread's bucket outlives
// the thread.
#ifndef GRADWIRE_WORKER_CPU_ACCOUNT_H_
#define GRADWIRE_WORKER_CPU_ACCOUNT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

// What a scope's CPU time is spent on.
enum class CpuActivity : int {
  // Compression with error feedback (the compressor, the residual update).
  kCompress = 0,
  // Worker-side optimizer state: the momentum velocity and its masking.
  kMomentum,
  // Compressed chunks into messages: ChunkData, push and pull requests.
  kEncode,
  // Push and Pull calls on the calling thread: serialization, the gRPC
  // stack, the system calls of the socket.
  kRpc,
  // Pulled answers parsed back into compressed chunks.
  kDecode,
  // Copies into and out of tensors: pulled values written into the
  // parameters, device-to-host copies of gradients.
  kCopy,
  // The rest of the synchronisation on its threads: bookkeeping, queueing,
  // metrics, zero gradients for parameters without one.
  kSyncOther,
};
inline constexpr int kNumCpuActivities = 7;

// "compress", "momentum", "encode", "rpc", "decode", "copy", "sync_other".
const char* CpuActivityName(CpuActivity activity);

// Seconds of CPU since StartSteps(), by what they were spent on.
struct CpuTotals {
  uint64_t steps = 0;
  double activity[kNumCpuActivities] = {};
  double compute = 0;
  double other_threads = 0;
  // Scopes entered (for the cost of the account itself).
  uint64_t scopes = 0;

  double of(CpuActivity a) const { return activity[static_cast<int>(a)]; }
  // Every activity plus other_threads: what the process spent on anything
  // but computing.
  double communication() const;
};

class CpuAccount {
 public:
  // Adds the calling thread's CPU time between construction and
  // destruction to `activity` of `account` (nothing when `account` is
  // null). Must be destroyed on the thread that made it, in reverse order
  // of construction (as a local variable is).
  class Scope {
   public:
    Scope(CpuAccount* account, CpuActivity activity);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CpuAccount* const account_;
    const CpuActivity activity_;
    Scope* parent_ = nullptr;
    int64_t start_ns_ = 0;
    // CPU time of the scopes nested inside this one.
    int64_t nested_ns_ = 0;
  };

  CpuAccount();
  ~CpuAccount();
  CpuAccount(const CpuAccount&) = delete;
  CpuAccount& operator=(const CpuAccount&) = delete;

  // On the training thread: steps start now (what came before is not
  // counted).
  void StartSteps();
  // On the training thread, after each step: see the file comment.
  void EndStep();
  CpuTotals Totals() const;

  // The calling thread's / the process's CPU time, in nanoseconds.
  static int64_t ThreadCpuNanos();
  static int64_t ProcessCpuNanos();

 private:
  // One thread's sums. Written only by its thread, read by any.
  struct Bucket {
    std::atomic<int64_t> ns[kNumCpuActivities] = {};
    std::atomic<uint64_t> scopes{0};
    int64_t SumNanos() const;
  };
  // The calling thread's bucket, made on its first scope.
  Bucket* ThisThreadBucket();
  void Add(CpuActivity activity, int64_t ns);
  // The scoped nanoseconds of every bucket.
  int64_t AllScopedNanos() const;

  // Constant after construction: tells this account's buckets from those
  // of an account that lived at the same address before.
  const uint64_t id_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Bucket>> buckets_ ABSL_GUARDED_BY(mu_);

  // Written only by the training thread (StartSteps, EndStep); read by
  // Totals() from any.
  std::atomic<int64_t> compute_ns_{0};
  std::atomic<int64_t> other_threads_ns_{0};
  std::atomic<uint64_t> steps_{0};
  // Only the training thread touches these: the readings at the last step
  // end.
  int64_t last_thread_ns_ = 0;
  int64_t last_process_ns_ = 0;
  int64_t last_own_scoped_ns_ = 0;
  int64_t last_all_scoped_ns_ = 0;
  // Set by StartSteps: scopes count from then on.
  std::atomic<bool> started_{false};
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_CPU_ACCOUNT_H_
