// One parameter-server shard: the logic behind the ParameterServer service,
// free of gRPC so that it can be tested and benchmarked directly.
//
// One class, one file per operation:
//   shard.cc             construction, Info, ActiveWorkers
//   shard_init.cc        Init: the first one with values installs config and
//                        chunks; before it, the election of the worker
//                        that sends them (init_election.h)
//   shard_push.cc        Push: sender -> decode (pushed_chunks.h) -> lock ->
//                        consistency rule judges each step -> ChunkUpdater
//                        (optimizer, pull delta) -> journal
//   shard_pull.cc        Pull: wait for the step, then dense or delta
//   shard_membership.cc  DropWorker and rejoins (the live set)
//   shard_snapshot.cc    Snapshot, Restore, StateDigest
// What each consistency mode decides is in common/consistency/ (one mode per
// file); what the shard does with the decision is chunk_updater.h.
//
// The shard owns the chunks declared to it at Init. Pushes are validated in
// full (every chunk decoded, every step and worker checked) before any of
// them is applied; then the request's chunks are locked in key order and
// applied together, so a multi-chunk push is all-or-nothing. Chunks are
// independent: pushes and pulls of different chunks run in parallel, and
// there is no shard-wide lock on the hot path.
//
// Consistency (per chunk):
//   clock    steps every worker has pushed and the chunk has applied.
//   version  optimizer updates applied.
//   BSP  pushes of step `clock` are summed (divided by num_workers); when all
//        workers have pushed it the optimizer runs: clock++ and version++.
//        A push of a later step is OUT_OF_RANGE.
//   ASP  every push runs the optimizer at once (version++); clock is the
//        slowest worker's pushed-step count.
//   SSP  as ASP, but a push of step t is OUT_OF_RANGE unless
//        t <= clock + staleness.
// Live set: each chunk waits only for the workers in its live set. A
// dropped worker's BSP steps complete with the pushers' mean, its late
// pushes are duplicates, and it rejoins by Init (once without a push) or
// by a push the chunk applies; the rules are in docs/failure.md
// ("Worker failure"). The live sets (and which workers an Init revived)
// are part of snapshots: a checkpoint taken while a worker is dropped
// restores it dropped.
//
// Exactly once: a push of (worker, step, chunk) that was already accounted
// for is acknowledged with duplicate = true and not applied again. A worker
// may run at most kStepWindow steps ahead of its own oldest missing step
// (common/consistency/worker_progress.h).
//
// Pull deltas: with a pull compressor configured, each chunk keeps
// `shadow`, the weights every worker on deltas holds, and publishes
// d = C(w - shadow), adding D(d) to shadow (published_deltas.h; when
// it publishes, per mode, is in docs/architecture.md). Alternatively
// (AsyncPullDeltas::kPerWorker) ASP and SSP keep one shadow per worker
// (worker_replicas.h). Without a pull compressor, pulls return w in the
// requested dense precision.
//
// History epoch: versions name weights only within one history, and a
// restart (from a checkpoint without the write-ahead log, or from nothing)
// repeats version numbers with other weights behind them. Each Shard object
// therefore has a non-zero history epoch, fixed at construction, that every
// pull answer carries; a delta (or an "already current" answer) goes only
// to a chunk pulled with that same epoch, every other pull gets dense
// weights. The epoch is not part of snapshots: a restored shard is a new
// history, which costs each worker one dense answer per chunk.
//
// Metrics: every Push is counted by outcome, and aggregation, optimizer
// and pull-wait times and ASP/SSP staleness are observed, in the
// ShardMetrics given at construction (shard_metrics.h), with lock-free
// atomic updates. The time of each worker's last accepted push is kept for
// ActiveWorkers.
//
// Thread safety: all methods are safe to call concurrently.
#ifndef GRADWIRE_SERVER_SHARD_SHARD_H_
#define GRADWIRE_SERVER_SHARD_SHARD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/codec/push_wire.h"
#include "common/compress/compressor.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/chunk_state.h"
#include "server/shard/init_election.h"
#include "server/shard/init_parts.h"
#include "server/shard/memory_budget.h"
#include "server/shard/shard_config.h"
#include "server/shard/shard_journal.h"
#include "server/shard/shard_metrics.h"
#include "server/shard/shard_options.h"
#include "server/shard/snapshot.h"
#include "server/shard/worker_replicas.h"

namespace gradwire {

class ChunkUpdater;
class ThreadPool;
class WorkerPresence;

class Shard {
 public:
  // `shard_metrics` is not owned and must outlive the shard; null counts
  // into a registry of the shard's own that nothing reads (tests, tools).
  explicit Shard(ShardOptions options, ShardMetrics* shard_metrics = nullptr);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Declares chunks and config. The first valid Init with values wins; an
  // identical one later (with or without values) is acknowledged; a
  // conflicting one is FAILED_PRECONDITION naming the difference. Invalid
  // requests are INVALID_ARGUMENT. A first Init over max_chunks or
  // max_init_overhead_bytes is RESOURCE_EXHAUSTED, refused before anything
  // is allocated for its chunks. An accepted Init is answered with each
  // declared chunk's version, the worker's next step and, where a pull
  // would need nothing else, the fingerprint of the weights a first pull
  // answers (init_answer.h).
  //
  // An Init too large for one message comes in parts (InitRequest.
  // values_parts; init_parts.h): each part is checked and decoded as it
  // arrives and answered with values_parts_received; the last one journals
  // and installs them all as one Init with values would. A part 0 while
  // another worker's parts are arriving is answered values_pending. A first
  // Init (or the parts so far) whose model state does not fit
  // ShardOptions::memory_limit_bytes is RESOURCE_EXHAUSTED (CheckModelFits,
  // init_budget.h). Every answer carries max_message_bytes.
  //
  // An Init with values_omitted on an uninitialised shard is checked as
  // the Init with values would be (config, identity, budget, numel, repeated
  // keys), then answered from the election (init_election.h): send_values
  // to the elected worker, values_pending with retry_after_ms to the
  // others. It changes nothing on the shard and is not journaled, and
  // never waits: a replay that meets one (it cannot, since it follows the
  // Init that installed) would still not block. `now` is the election's
  // clock (tests pass their own).
  absl::Status Init(const v1::InitRequest& request, v1::InitResponse* response);
  absl::Status Init(const v1::InitRequest& request, v1::InitResponse* response,
                    absl::Time now);

  // Validates the whole request, then applies it atomically (see above).
  absl::Status Push(const v1::PushRequest& request, v1::PushResponse* response);
  // The same for a push read in place from its received bytes
  // (common/codec/push_wire.h); its `wire` is what the journal records.
  absl::Status Push(const PushView& request, v1::PushResponse* response);

  // Waits until each chunk's clock reaches min_step (DEADLINE_EXCEEDED if
  // `deadline` passes first), then answers dense weights or deltas (deltas
  // only for chunks pulled with have_epoch == history_epoch()) and sets
  // response->history_epoch. When
  // `waited` is set, the time spent waiting is added to it. Refused before
  // anything is waited for or built: INVALID_ARGUMENT for a request naming
  // more chunks than the shard owns or a chunk twice; RESOURCE_EXHAUSTED
  // when the answer's dense size would exceed
  // ShardOptions::max_message_bytes (also checked as the answer is built,
  // since a delta may encode larger than its dense size). With
  // allow_partial the answer holds the longest prefix of the chunks that
  // fits (waiting only for those) and sets response->partial when that is
  // not all of them; RESOURCE_EXHAUSTED only when the first alone does not
  // fit.
  absl::Status Pull(const v1::PullRequest& request, absl::Time deadline,
                    v1::PullResponse* response,
                    absl::Duration* waited = nullptr);

  v1::ShardInfo Info() const;

  // Takes `worker` out of the live set of every chunk (see above) and
  // completes what then waits for no live worker. A pure function of the
  // shard's state and its argument: the caller decides when a worker is
  // gone (worker_liveness.h reads the clock), and the shard neither
  // reads a clock nor logs. The drop changes chunk state, so it is
  // journaled (JournalRecordType::kDropWorker, under every chunk's lock, so
  // that it is ordered with each chunk's pushes) and a replay must call this
  // same method for the record. Dropping a dropped worker changes nothing.
  // FAILED_PRECONDITION before Init; OUT_OF_RANGE for an unknown worker.
  absl::Status DropWorker(uint32_t worker);

  // Whether `worker` is in the live set (false before Init or for an id
  // outside the config); LiveWorkers counts them.
  bool IsLive(uint32_t worker) const;
  uint32_t LiveWorkers() const;

  // Whether the worker `request` names has pushed, in every chunk it names,
  // each step the pull waits for (min_step <= the worker's oldest missing
  // step there): such a pull, while it waits, waits on other workers, which
  // is progress (worker_liveness.h). False before Init, for an unknown
  // worker or chunk, and for a pull that names no chunk.
  bool PullWaitsOnOthers(const v1::PullRequest& request) const;

  bool initialized() const {
    return initialized_.load(std::memory_order_acquire);
  }

  uint32_t shard_id() const { return options_.shard_id; }

  // Non-zero; constant for the shard's lifetime (see above).
  uint64_t history_epoch() const { return history_epoch_; }

  // Workers of the accepted config; 0 before Init.
  uint32_t num_workers() const {
    return initialized() ? config_->num_workers : 0;
  }

  // Workers whose last accepted or duplicate push arrived at most `window`
  // before `now`; 0 before Init.
  uint32_t ActiveWorkers(absl::Time now, absl::Duration window) const;

  // Where this shard counts its work (for the service and checkpointer).
  ShardMetrics& metrics() const { return *metrics_; }

  // The budget that decoded pushes, pull answers and kept pull deltas are
  // reserved against (ShardOptions::memory_budget_bytes); the service
  // reserves the serialized copy of each answer here too. Thread-safe.
  MemoryBudget& memory_budget() const { return memory_budget_; }

  // Bytes of per-worker replicas held for ASP/SSP pull deltas.
  uint64_t replica_bytes() const { return replicas_.bytes(); }

  // Total optimizer updates applied since start (for checkpoint cadence).
  uint64_t updates_applied() const {
    return updates_applied_.load(std::memory_order_relaxed);
  }

  // A copy of the whole state, taken under every chunk's lock at once (and
  // the Init lock), so that it holds exactly the journal records up to the
  // one it names (ShardSnapshot::journal_sequence) and none after it: a
  // replay over it must apply exactly the records after that one. Pushes
  // and pulls wait for the copy (one pass over the shard's memory).
  // FAILED_PRECONDITION before Init.
  absl::StatusOr<ShardSnapshot> Snapshot() const;

  // Replaces an uninitialised shard's state with `snapshot` (a checkpoint).
  // FAILED_PRECONDITION if already initialised or the snapshot belongs to
  // another shard; INVALID_ARGUMENT if it is inconsistent.
  absl::Status Restore(ShardSnapshot snapshot);

  // Reports every accepted Init and every Push that applied something to
  // `journal` (shard_journal.h) and waits until it is durable before
  // answering; null (the default) journals nothing. `journal` is not owned
  // and must outlive the shard. Call before serving requests.
  // Tells `journal` to number its records after journal_sequence().
  void set_journal(ShardJournal* journal) {
    journal_ = journal;
    if (journal_ != nullptr) journal_->ContinueAfter(journal_sequence());
  }

  // The sequence number of the last journal record this state holds: the
  // restored checkpoint's (0 without one, or from a checkpoint of format 1),
  // raised by each replayed record (NoteReplayedRecord) and each record
  // journaled since.
  uint64_t journal_sequence() const {
    return journal_sequence_.load(std::memory_order_acquire);
  }
  // Replay (server/durability/wal_replay.h) reports each record it fed back
  // by its sequence number, so that set_journal's journal numbers its
  // records after them. Call before set_journal.
  void NoteReplayedRecord(uint64_t sequence) { NoteJournaled(sequence); }

  // A hash of every piece of state a snapshot holds, for tests that prove a
  // refused request changed nothing. The published pull deltas are not part
  // of it (a restored shard answers with the dense shadow until the next
  // publication). Without `with_shadow` the shadow is left out too: an
  // answered ASP/SSP pull may publish, which moves the shadow but nothing
  // else.
  uint64_t StateDigest(bool with_shadow = true) const;

 private:
  // How a Push ended (shard_push.cc).
  struct PushResult;

  // Init under init_mu_; sets *journal_ticket when it journaled the Init
  // (shard_init.cc).
  absl::Status InitLocked(const v1::InitRequest& request, absl::Time now,
                          v1::InitResponse* response, uint64_t* journal_ticket);
  // The answer to an Init without values on an uninitialised shard, after
  // the checks an Init with values gets (shard_init.cc).
  absl::Status ElectValuesProvider(const v1::InitRequest& request,
                                   absl::Time now, v1::InitResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(init_mu_);
  // One part of an Init in parts on an uninitialised shard (init_parts.h):
  // checked as an Init with values is and collected; the last part
  // journals the collection, installs it and sets initialized_now, an
  // earlier one answers values_parts_received, and a part 0 while another
  // worker's parts are arriving answers values_pending (shard_init.cc).
  absl::Status AddInitPart(const v1::InitRequest& part, absl::Time now,
                           v1::InitResponse* response, uint64_t* journal_ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(init_mu_);
  // Journals an accepted Init (or part) and raises journal_sequence_;
  // called before Install, so that no push of the shard can be journaled
  // (or acknowledged) ahead of the Init that installed it.
  void JournalInit(const v1::InitRequest& request, uint64_t* journal_ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(init_mu_);
  // Makes `config` and `chunks` the shard's state: the step from
  // uninitialised to initialised, of Init and of Restore.
  void Install(std::unique_ptr<const ShardConfig> config, ChunkMap chunks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(init_mu_);
  ChunkState* FindChunk(uint64_t key) const;
  // What a Pull must get right before anything is waited for or built
  // (shard_pull.cc): chunk count, ownership, repeats, the answer's size.
  // Sets *answered to the number of leading chunks the answer holds: all
  // of them, or with allow_partial those that fit max_message_bytes.
  absl::Status CheckPulledChunks(const v1::PullRequest& request,
                                 int* answered) const;
  // Waits until each of the first `count` chunks of `request` reaches its
  // min_step (shard_pull.cc). Every answered chunk's step comes first, then
  // the answer: a pull that waits (and is retried in slices by the service)
  // encodes nothing until all of its chunks are ready.
  absl::Status AwaitSteps(const v1::PullRequest& request, int count,
                          absl::Time deadline, absl::Duration* waited) const;
  // Push without the counting and the wait for durability (shard_push.cc);
  // fills *result on every return.
  absl::Status ValidateAndApply(const PushView& request,
                                v1::PushResponse* response, PushResult* result);
  // After an accepted Init of a dropped worker: back into every chunk's live
  // set, journaled as the Init; sets *journal_ticket when journaled
  // (shard_membership.cc).
  void RejoinByInit(const v1::InitRequest& request, uint64_t* journal_ticket);
  // Counts and logs a worker's return to the live set.
  void RecordRejoin(uint32_t worker, uint64_t step, const char* how);
  // Raises journal_sequence_ to `ticket`. Called with the locks held under
  // which the record was appended, so that Snapshot, holding every lock,
  // reads the last record its copy holds.
  void NoteJournaled(uint64_t ticket);
  // The memory budget's reclaimer (memory_budget.h): drops kept pull deltas
  // of any chunk, oldest first, until `needed` bytes are released or none
  // is left that can be dropped without waiting for a lock; returns the
  // bytes released.
  uint64_t ReclaimKeptDeltas(uint64_t needed);

  // Constant after construction. Without metrics from the caller, the
  // shard's own registry and metrics.
  const ShardOptions options_;
  const uint64_t history_epoch_;
  // Thread-safe, hence mutable; declared before chunks_, whose kept deltas
  // hold leases on it, so that it outlives them.
  mutable MemoryBudget memory_budget_;
  std::unique_ptr<metrics::Registry> own_registry_;
  std::unique_ptr<ShardMetrics> own_metrics_;
  ShardMetrics* metrics_ = nullptr;

  // Guards the switch from uninitialised to initialised. After that,
  // config_, chunks_, updater_ and workers_ are constant and read without
  // it.
  mutable absl::Mutex init_mu_;
  std::atomic<bool> initialized_{false};
  std::unique_ptr<const ShardConfig> config_;
  ChunkMap chunks_;
  // Who sends the initial values while the shard has none.
  InitElection election_ ABSL_GUARDED_BY(init_mu_){
      options_.init_values_timeout, options_.init_preferred_grace};
  // The parts of an Init in parts received so far.
  InitParts init_parts_ ABSL_GUARDED_BY(init_mu_);
  // Carries out accepted pushes and clock moves on a chunk (config_'s rule
  // and optimizer).
  std::unique_ptr<const ChunkUpdater> updater_;
  // Per worker: last push time and live-set membership, lock-free.
  std::unique_ptr<WorkerPresence> workers_;
  // ASP/SSP pull deltas (worker_replicas.h); unused in BSP.
  WorkerReplicas replicas_;

  std::atomic<uint64_t> updates_applied_{0};
  // The helpers of ShardOptions::apply_threads; null: none.
  std::unique_ptr<ThreadPool> apply_pool_;
  // Set before serving; see set_journal.
  ShardJournal* journal_ = nullptr;
  // See journal_sequence(). Raised under the chunk locks (or init_mu_) of
  // the record, possibly by several threads at once, hence atomic.
  std::atomic<uint64_t> journal_sequence_{0};
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SHARD_H_
