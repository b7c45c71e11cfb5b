// The two ways gradwire-bench-server delivers pushes to a shard, behind one
// interface, and the pusher threads that drive them.
//
// In-process: each pusher thread calls Shard::Push on a shard of this process.
// This is the shard's own cost (decode, validate, lock, apply), no transport.
//
// gRPC: a real grpc::Server (callback API, the settings of ShardServer: 64 MiB
// messages, no SO_REUSEPORT) serves ParameterServerService on 127.0.0.1 with
// an OS-chosen port, and each pusher thread calls Push through a stub of its
// own channel. The channels use a local subchannel pool, so each pusher has
// its own TCP connection: gRPC otherwise shares one subchannel (one HTTP/2
// connection) among channels with equal arguments, and every pusher's
// messages would queue on it.
// Each pusher makes one synchronous call at a time, as a worker that waits
// for its ack before the next push; every push therefore pays one loopback
// round trip (thread wake-ups on both sides).
//
// Both start a fresh shard and Init it directly (untimed); only Push is
// measured.
#ifndef GRADWIRE_BENCH_SERVER_PUSH_H_
#define GRADWIRE_BENCH_SERVER_PUSH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "bench/server/workload.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard_metrics.h"

namespace gradwire::bench {

// Deadline of one push over gRPC, and of a loopback connection attempt.
inline constexpr int kCallDeadlineSeconds = 30;

class PushTarget {
 public:
  virtual ~PushTarget() = default;

  // Delivers `request` as pusher `pusher` and returns the shard's answer.
  // Safe to call concurrently for distinct pushers.
  virtual absl::Status Push(uint32_t pusher,
                            const v1::PushRequest& request) = 0;

  // Optimizer updates the shard has applied since it started.
  virtual uint64_t updates_applied() const = 0;

  // Seconds the shard's Push calls have spent in `stage` since it started
  // (ShardMetrics; the in-process path has no parse or respond stage).
  virtual double stage_seconds(PushStage stage) const = 0;
};

// A fresh shard 0 of 1, initialised in process with `init`.
// `apply_threads` as ShardOptions::apply_threads.
absl::StatusOr<std::unique_ptr<PushTarget>> StartInProcess(
    const v1::InitRequest& init, int apply_threads);

// As StartInProcess, served over loopback gRPC to `pushers` channels, each
// connected before this returns (UNAVAILABLE if one does not connect within
// kCallDeadlineSeconds).
absl::StatusOr<std::unique_ptr<PushTarget>> StartGrpc(
    const v1::InitRequest& init, uint32_t pushers, int apply_threads);

class RoundBarrier;

// One thread per pusher, started once and kept across Runs, as a server's
// handler threads are: per-thread state of the shard (the dense scratch
// buffer of an ASP update) is then allocated once per configuration instead
// of in every timed call.
//
// Thread safety: Run is called by one thread at a time.
class PusherPool {
 public:
  // Starts `pushers` threads (at most loads.size()). Thread w pushes as
  // worker w the loads w, w + pushers, w + 2 * pushers, ... of `loads` in
  // turn, one a round, so that a pusher's next round carries other
  // positions, as a worker's next step does, while no two threads ever
  // share a load. `loads` and `target` must outlive the pool.
  PusherPool(absl::Span<PusherLoad> loads, uint32_t pushers,
             bool barrier_per_round, PushTarget* target);
  // Stops and joins the threads.
  ~PusherPool();
  PusherPool(const PusherPool&) = delete;
  PusherPool& operator=(const PusherPool&) = delete;

  // Runs `rounds` rounds on every thread and waits for all: in round r,
  // pusher w pushes each of its requests at step first_step + r, starting
  // at chunk w * num_chunks / pushers and wrapping around, so that
  // concurrent pushers begin on different chunk locks. With
  // `barrier_per_round` (BSP, where a chunk refuses step r + 1 until every
  // worker pushed step r) the pushers wait for each other after each round.
  // Returns the first error of any pusher; the others stop at their next
  // push. After an error the pool is spent: later Runs fail at once.
  absl::Status Run(uint64_t first_step, int rounds);

 private:
  void Loop(uint32_t pusher);
  absl::Status PushAll(uint32_t pusher, uint64_t first_step, int rounds);
  // The load `pusher` sends in round `round` (see the constructor).
  PusherLoad& LoadFor(uint32_t pusher, int round) const;

  // Constant after construction.
  const absl::Span<PusherLoad> loads_;
  const uint32_t pushers_;
  PushTarget* const target_;
  // Null without barrier_per_round. Thread-safe itself.
  const std::unique_ptr<RoundBarrier> barrier_;

  std::atomic<bool> failed_{false};
  absl::Mutex mu_;
  // Bumped by each Run; a thread runs once per generation.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t first_step_ ABSL_GUARDED_BY(mu_) = 0;
  int rounds_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  // Started last, in the constructor's body.
  std::vector<std::thread> threads_;
};

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_PUSH_H_
