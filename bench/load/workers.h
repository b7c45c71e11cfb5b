// The simulated workers of gradwire-bench-load.
//
// A SimulatedWorker does on the wire what gradwire-worker does, without a
// model: per step it pushes one pre-built compressed gradient to every shard
// and then pulls every chunk from every shard, the requests to different
// shards in flight at once. Pulls carry the version the worker holds and
// the min_step of the consistency mode (ConsistencyRule::MinStepToPull, the
// worker's own: ASP 0, BSP step + 1, SSP step + 1 - staleness), so BSP and
// SSP workers wait for each other on the shards as real ones do. Each pulled
// chunk is decoded and validated, and a delta must bring the worker from the
// version it holds to the next.
//
// Each worker has its own channel per shard, with a subchannel pool of its
// own: separate worker processes hold separate connections, whereas gRPC
// would otherwise multiplex every channel of this process to one shard over
// one connection.
//
// The first failed RPC of any worker aborts the run: every worker stops
// after its current call, and calls still in flight are cancelled (those
// are not counted as errors).
#ifndef GRADWIRE_BENCH_LOAD_WORKERS_H_
#define GRADWIRE_BENCH_LOAD_WORKERS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load/config.h"
#include "bench/load/workload.h"
#include "common/compress/compressed_chunk.h"
#include "common/consistency/consistency_rule.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gradwire::bench {

// Stops every worker of a run once one of them failed.
//
// Thread safety: all methods are safe to call concurrently.
class RunAbort {
 public:
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // Cancels every registered call, and every call registered later.
  void Abort();
  // `context` must stay valid until Unregister.
  void Register(grpc::ClientContext* context);
  void Unregister(grpc::ClientContext* context);

 private:
  std::atomic<bool> aborted_{false};
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
};

// What one worker saw; Merge adds another worker's.
struct WorkerTally {
  // Milliseconds of each successful Push and Pull RPC (one per shard and
  // step), from the call to its completion.
  std::vector<float> push_ms;
  std::vector<float> pull_ms;
  uint64_t errors = 0;
  std::string first_error;
  // Serialized protobuf bytes of requests sent and responses received
  // (Push and Pull; Init is not counted).
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // Pulled chunks answered as a delta, and as dense weights.
  uint64_t delta_chunks = 0;
  uint64_t dense_chunks = 0;
  // Deltas after the first in chained answers (ChunkWeights.chain).
  uint64_t chained_deltas = 0;
  // Serialized Pull responses, and what dense fp32 answers of the same
  // chunks would have carried (4 bytes per element).
  uint64_t pulled_bytes = 0;
  uint64_t dense_pull_bytes = 0;

  void Merge(const WorkerTally& other);
};

// Thread safety: Init from one thread, then RunSteps from one thread at a
// time; tally() once RunSteps has returned.
class SimulatedWorker {
 public:
  // `model` and `pushes` are not owned and must outlive the worker; only
  // this worker touches `pushes` (it sets their step). `abort` is shared by
  // the run's workers.
  SimulatedWorker(uint32_t id, const LoadBenchConfig& config,
                  const LoadModel& model, WorkerPushes* pushes,
                  const std::vector<std::string>& addresses, RunAbort* abort);

  // Sends this worker's Init to every shard (the model's Init with this
  // worker's id; `inits` is modified and restored). FAILED_PRECONDITION
  // when a shard says this worker already pushed (a restored checkpoint).
  absl::Status Init(std::vector<v1::InitRequest>* inits);

  // Runs steps [first, end), or fewer when the run is aborted (a failure is
  // recorded in the tally and aborts the run).
  void RunSteps(uint64_t first, uint64_t end);

  const WorkerTally& tally() const { return tally_; }

 private:
  // Sends requests[s] to every shard s at once through `start` and waits
  // for all. Records the latency of each call that succeeded in `latencies`
  // and each failure in the tally; returns the first failure.
  template <typename Request, typename Response, typename Start>
  absl::Status FanOut(const char* rpc, uint64_t step,
                      const std::vector<Request>& requests,
                      std::vector<Response>* responses,
                      std::vector<float>* latencies, Start start);
  void RecordError(const absl::Status& status);

  absl::Status PushStep(uint64_t step);
  absl::Status PullStep(uint64_t step);
  absl::Status ApplyPulled(uint32_t shard, const v1::PullResponse& response);
  absl::Status CallError(uint32_t shard, const char* rpc, uint64_t step,
                         const grpc::Status& status) const;

  const uint32_t id_;
  const LoadBenchConfig& config_;
  const LoadModel& model_;
  WorkerPushes* const pushes_;
  RunAbort* const abort_;
  // The job's consistency mode: what a pull after a push waits for.
  const std::unique_ptr<const ConsistencyRule> rule_;
  const std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  // Version held of every chunk, by key (UINT64_MAX: nothing yet).
  std::vector<uint64_t> versions_;
  // History epoch of every shard's last answer, by shard (0: none yet): all
  // chunks of a shard are pulled in one request, so one epoch covers them.
  std::vector<uint64_t> epochs_;
  CompressedChunk decoded_;
  WorkerTally tally_;
};

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_WORKERS_H_
