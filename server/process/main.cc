// gradwire-server: one parameter-server shard.
//
//   gradwire-server --port=7000 --shard-id=0 --num-shards=2
//       --checkpoint-dir=/var/lib/gradwire/shard0 --checkpoint-every=100
//
// Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT); 1 when the
// server cannot start (port taken, durable state in --checkpoint-dir that
// cannot be read completely, without --discard-unreadable-state) or the final
// checkpoint fails; kUsageExitCode (2) for a bad command line, before
// anything is bound. stdout carries exactly one line,
// "gradwire-server listening on HOST:PORT", for scripts; every log line goes
// to stderr. Prometheus metrics are served at
// http://--metrics-address:--metrics-port/metrics.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags/metrics_flags.h"
#include "common/flags/program.h"
#include "common/flags/tls_flags.h"
#include "common/heap_tuning.h"
#include "common/lock_checks.h"
#include "common/port_file.h"
#include "server/process/server_options.h"
#include "server/process/shard_server.h"
#include "server/shard/stderr_log.h"

ABSL_FLAG(std::string, address, "0.0.0.0",
          "Address to bind; 0.0.0.0 is every IPv4 interface.");
ABSL_FLAG(int64_t, port, 0,
          "TCP port; 0 lets the OS pick one (printed on stdout and written to "
          "--port-file).");
ABSL_FLAG(std::string, port_file, "",
          "If set, the chosen port is written to this file (atomically, via a "
          "rename) once the server listens.");
ABSL_FLAG(int64_t, shard_id, 0, "This shard's id, in [0, --num-shards).");
ABSL_FLAG(int64_t, num_shards, 1,
          "Number of shards in the job; Init must agree.");
ABSL_FLAG(int64_t, num_workers, 0,
          "Number of workers; 0 accepts the number Init declares.");
ABSL_FLAG(std::string, mode, "",
          "Consistency mode: bsp, asp or ssp; empty accepts the mode Init "
          "declares.");
ABSL_FLAG(int64_t, staleness, 0,
          "SSP staleness (with --mode=ssp); Init must agree.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory for checkpoints; the newest valid one is restored at "
          "start. Empty: no checkpoints.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "Write a checkpoint after this many optimizer updates (counted over "
          "all chunks); 0: only at shutdown.");
ABSL_FLAG(bool, wal, true,
          "Keep a write-ahead log of accepted pushes in --checkpoint-dir and "
          "replay it at start, so that a killed shard loses no acknowledged "
          "update. --wal=false: a kill loses the updates since the last "
          "checkpoint. No effect without --checkpoint-dir.");
ABSL_FLAG(bool, wal_fsync, false,
          "fdatasync the write-ahead log before acknowledging a push: "
          "survives the machine's death, not only the process'.");
ABSL_FLAG(std::string, worker_tokens_file, "",
          "File of \"WORKER_ID TOKEN\" lines: each worker must call with "
          "its own bearer token and may only Init, push and pull as itself; "
          "the --auth-token-file token then only reads GetInfo. Empty: any "
          "caller with the shared token may act as any worker.");
ABSL_FLAG(bool, discard_unreadable_state, false,
          "When the state in --checkpoint-dir cannot be read completely (a "
          "corrupt or other-version checkpoint, non-finite weights, a "
          "damaged write-ahead log or one that does not fit the checkpoint), "
          "move every checkpoint and log file into a discarded-<unix time>/ "
          "folder there (never deleted; each file is logged) and start "
          "fresh. Default: refuse to start, naming the file.");
ABSL_FLAG(int64_t, wal_checkpoint_bytes, int64_t{256} << 20,
          "Also write a checkpoint once the current log segment holds this "
          "many bytes (bounds disk use and replay time); 0: no bound.");
ABSL_FLAG(int64_t, threads, 0,
          "Threads that run Init, Push and GetInfo (parse, validate, apply, "
          "write-ahead log); 0: one per core, at least 2. Calls beyond them "
          "queue without a thread.");
ABSL_FLAG(int64_t, pull_threads, 0,
          "Threads that run Pulls: at most this many Pulls wait for a step "
          "at once; more queue without a thread until one is free. 0: "
          "--num-workers x --max-waiting-pulls-per-worker, at least 64 (64 "
          "without --num-workers), so that every worker's allowed pulls get "
          "a thread.");
ABSL_FLAG(int64_t, apply_threads, -1,
          "Threads besides a Push's own that update the chunks of one push "
          "in parallel (pushes of two or more chunks and 64K elements or "
          "more); -1: one less than the usable cores, 0: none.");
ABSL_FLAG(int64_t, max_concurrent_streams, 100,
          "Calls one connection may have in flight at once (HTTP/2 streams).");
ABSL_FLAG(int64_t, max_queued_calls, 4096,
          "Calls that may wait in each queue (Init/Push/GetInfo, and Pull) "
          "for a thread; more are answered RESOURCE_EXHAUSTED, which clients "
          "retry after a backoff.");
ABSL_FLAG(int64_t, max_calls_per_connection, 256,
          "Calls one connection may hold on the shard, queued, running or "
          "with an answer not yet sent; "
          "more are answered RESOURCE_EXHAUSTED (retried after a backoff).");
ABSL_FLAG(int64_t, max_waiting_pulls_per_worker, 8,
          "Pulls one worker (the worker its --worker-tokens-file token "
          "proves, else one connection) may have in flight at once, so that "
          "no client can hold every pull thread; more are answered "
          "RESOURCE_EXHAUSTED (retried after a backoff).");
ABSL_FLAG(int64_t, memory_quota_bytes, int64_t{1} << 30,
          "Memory gRPC may use for the buffers of all calls together; at "
          "least 2 * --max-message-bytes.");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
          "Largest gRPC message received or sent; larger ones are refused "
          "with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, memory_budget_bytes, int64_t{4} << 30,
          "Most bytes the shard holds at once in decoded pushes, pull answers "
          "being built and kept pull deltas (memory the gRPC quota does not "
          "see); a push or pull past it is refused with RESOURCE_EXHAUSTED "
          "and retried by the worker, kept deltas are dropped oldest first. "
          "At least 2 * --max-message-bytes.");
ABSL_FLAG(int64_t, memory_limit_bytes, -1,
          "Most bytes this shard process may hold in all: the first Init is "
          "refused at start-up, naming the sizes, when the model state of "
          "this shard's part (weights, optimizer state, step sum, pull "
          "shadow) leaves less than 2 * --max-message-bytes under it. -1 "
          "(default): the cgroup's memory limit, else the host's memory; 0: "
          "no limit.");
ABSL_FLAG(int64_t, max_chunks, 16384,
          "Most chunks the first Init may declare to this shard (at 4 MiB "
          "chunks the default is 64 GiB); a larger Init is refused with "
          "RESOURCE_EXHAUSTED naming the count and this flag.");
ABSL_FLAG(std::string, async_pull_deltas, "shared",
          "ASP/SSP with delta pulls: 'shared' publishes each chunk's "
          "compressed change every --async-publish-every updates (and when a "
          "pull needs newer weights) and answers every worker from those "
          "deltas, one compression per publication; 'per-worker' keeps a "
          "replica of each worker's weights and compresses a delta for every "
          "pull (the freshest weights, a pass over the chunk per pull, and "
          "--max-replica-bytes of memory).");
ABSL_FLAG(int64_t, async_publish_every, 0,
          "Shared ASP/SSP pull deltas: optimizer updates of a chunk between "
          "two publications; 0 uses ceil(workers / 4), so that a worker's "
          "pull is a chain of about 4 deltas and misses at most a quarter of "
          "the others' newest pushes.");
ABSL_FLAG(int64_t, max_replica_bytes, int64_t{1} << 30,
          "ASP/SSP with --async-pull-deltas=per-worker: most bytes of "
          "per-worker replicas (one float copy of a chunk per worker that "
          "pulls it) this shard keeps to answer compressed deltas; workers "
          "beyond it get dense pulls. 0 keeps none.");
ABSL_FLAG(int64_t, max_init_overhead_bytes, int64_t{64} << 20,
          "Most bytes the first Init may make this shard allocate beyond the "
          "model data it carries: per declared chunk its bookkeeping and "
          "tensor name, plus a progress entry and live-set bit for every "
          "worker (about 16 bytes per chunk and worker), estimated from the "
          "request before anything is allocated. An Init over it is refused "
          "with RESOURCE_EXHAUSTED naming the estimate and this flag.");
ABSL_FLAG(double, init_values_timeout_seconds, 60.0,
          "How long a worker elected to send the shard its initial values "
          "has before the next worker is elected instead (a worker that "
          "died at start-up); in (0, 86400]. Allow for one copy of the "
          "shard's chunks over the slowest link.");
ABSL_FLAG(double, init_preferred_grace_seconds, 1.0,
          "How long after a job's first valueless Init the shard waits for "
          "the worker it prefers to send its initial values (shard id modulo "
          "the workers, so that every worker's link carries a share of the "
          "model) before electing the first caller; in [0, 3600], at most "
          "--init-values-timeout-seconds counts. 0: the first caller sends.");
ABSL_FLAG(double, shutdown_grace_seconds, 10.0,
          "On SIGTERM/SIGINT, how long in-flight calls may run before they "
          "are cancelled.");
ABSL_FLAG(double, worker_timeout_seconds, 30.0,
          "Drop a worker from the live set after this many seconds without "
          "an Init, Push or Pull from it (a Pull waiting for its step counts "
          "as alive), so that BSP steps complete with the other workers' "
          "pushes; it rejoins with Init or a push of a step not yet "
          "completed. 0: never drop (a dead worker stalls BSP). The default "
          "30 stays below the 60 s a Pull waits at most, so the others go on "
          "before their pulls fail, and far above a slow worker's step.");

namespace gradwire {
namespace {

constexpr absl::string_view kUsage =
    "gradwire-server: one shard of a gradwire parameter server.\n"
    "Serves gradwire.v1.ParameterServer and grpc.health.v1.Health on one "
    "port,\nand Prometheus metrics over HTTP at /metrics on another.\n"
    "Stop it with SIGTERM or SIGINT (a final checkpoint is written).";

// The server's own flags; the metrics, TLS and --dry-run flags are shared
// (common/flags).
constexpr absl::string_view kServerFlagNames[] = {
    "address",
    "port",
    "port_file",
    "shard_id",
    "num_shards",
    "num_workers",
    "mode",
    "staleness",
    "checkpoint_dir",
    "checkpoint_every",
    "wal",
    "wal_fsync",
    "discard_unreadable_state",
    "worker_tokens_file",
    "wal_checkpoint_bytes",
    "threads",
    "pull_threads",
    "apply_threads",
    "max_concurrent_streams",
    "max_queued_calls",
    "max_calls_per_connection",
    "max_waiting_pulls_per_worker",
    "memory_quota_bytes",
    "max_message_bytes",
    "memory_budget_bytes",
    "memory_limit_bytes",
    "max_chunks",
    "max_init_overhead_bytes",
    "async_pull_deltas",
    "async_publish_every",
    "max_replica_bytes",
    "init_values_timeout_seconds",
    "init_preferred_grace_seconds",
    "shutdown_grace_seconds",
    "worker_timeout_seconds"};

ServerOptions OptionsFromFlags() {
  ServerOptions o;
  o.address = absl::GetFlag(FLAGS_address);
  o.port = absl::GetFlag(FLAGS_port);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.shard_id = absl::GetFlag(FLAGS_shard_id);
  o.num_shards = absl::GetFlag(FLAGS_num_shards);
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  o.mode = absl::GetFlag(FLAGS_mode);
  o.staleness = absl::GetFlag(FLAGS_staleness);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.wal = absl::GetFlag(FLAGS_wal);
  o.wal_fsync = absl::GetFlag(FLAGS_wal_fsync);
  o.discard_unreadable_state = absl::GetFlag(FLAGS_discard_unreadable_state);
  o.worker_tokens_file = absl::GetFlag(FLAGS_worker_tokens_file);
  o.wal_checkpoint_bytes = absl::GetFlag(FLAGS_wal_checkpoint_bytes);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.pull_threads = absl::GetFlag(FLAGS_pull_threads);
  o.apply_threads = absl::GetFlag(FLAGS_apply_threads);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  o.max_queued_calls = absl::GetFlag(FLAGS_max_queued_calls);
  o.max_calls_per_connection = absl::GetFlag(FLAGS_max_calls_per_connection);
  o.max_waiting_pulls_per_worker =
      absl::GetFlag(FLAGS_max_waiting_pulls_per_worker);
  o.memory_quota_bytes = absl::GetFlag(FLAGS_memory_quota_bytes);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  o.memory_limit_bytes = absl::GetFlag(FLAGS_memory_limit_bytes);
  o.max_chunks = absl::GetFlag(FLAGS_max_chunks);
  o.max_init_overhead_bytes = absl::GetFlag(FLAGS_max_init_overhead_bytes);
  o.async_pull_deltas = absl::GetFlag(FLAGS_async_pull_deltas);
  o.async_publish_every = absl::GetFlag(FLAGS_async_publish_every);
  o.max_replica_bytes = absl::GetFlag(FLAGS_max_replica_bytes);
  o.init_values_timeout_seconds =
      absl::GetFlag(FLAGS_init_values_timeout_seconds);
  o.init_preferred_grace_seconds =
      absl::GetFlag(FLAGS_init_preferred_grace_seconds);
  o.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  o.worker_timeout_seconds = absl::GetFlag(FLAGS_worker_timeout_seconds);
  o.metrics = MetricsEndpointFromFlags();
  o.transport = ServerTlsFilesFromFlags();
  // Per-worker tokens need TLS as the shared token does.
  o.transport.worker_tokens_file = o.worker_tokens_file;
  return o;
}

// Parses and validates the command line; exits on --help and --dry-run (0)
// and on a bad command line (kUsageExitCode).
ServerOptions ParseCommandLineOrExit(int argc, char** argv) {
  static const std::vector<absl::string_view> flag_names =
      JoinFlagNames({kServerFlagNames, kMetricsFlagNames, kServerTlsFlagNames,
                     kDryRunFlagNames});
  const ProgramFlags program = {"gradwire-server", kUsage, flag_names};
  ParseFlagsOrExit(program, argc, argv);
  ServerOptions options = OptionsFromFlags();
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) {
    ExitWithUsageError(program, s);
  }
  ExitAfterDryRunIfRequested(program);
  return options;
}

// Blocks SIGTERM and SIGINT in this thread and, because threads inherit the
// mask, in every thread started later; WaitForStopSignal then takes them
// synchronously, so no work ever runs inside a signal handler. Call before
// any thread starts.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A shell starts background jobs with SIGINT ignored, and an ignored
  // signal is discarded instead of reaching sigwait. Blocked, the default
  // action cannot run, so this only makes the signals arrive.
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  return signals;
}

int WaitForStopSignal(const sigset_t& signals) {
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) != 0) {
  }
  return signal_number;
}

int Run(const ServerOptions& options, const sigset_t& stop_signals) {
  const uint32_t shard_id = static_cast<uint32_t>(options.shard_id);
  // Each update of a chunk allocates and frees chunk-sized buffers (the
  // candidate weights, the step's mean).
  LogShardEventf(shard_id, "%s", TuneHeapForTraining().description);
  absl::StatusOr<std::unique_ptr<ShardServer>> server =
      ShardServer::Start(options);
  if (!server.ok()) {
    LogShardEventf(shard_id, "cannot start: %s", server.status().ToString());
    return 1;
  }
  std::printf("gradwire-server listening on %s\n",
              (*server)->connect_address().c_str());
  std::fflush(stdout);
  // The metrics port first: whoever waits for --port-file may then read it.
  if (!options.metrics.port_file.empty()) {
    if (absl::Status s =
            WritePortFile(options.metrics.port_file, (*server)->metrics_port());
        !s.ok()) {
      LogShardEventf(shard_id, "cannot write the metrics port file: %s",
                     s.ToString());
      return 1;
    }
  }
  if (!options.port_file.empty()) {
    if (absl::Status s = WritePortFile(options.port_file, (*server)->port());
        !s.ok()) {
      LogShardEventf(shard_id, "cannot write the port file: %s", s.ToString());
      return 1;
    }
  }
  const int signal_number = WaitForStopSignal(stop_signals);
  LogShardEventf(shard_id, "received %s",
                 signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  if (absl::Status s = (*server)->Shutdown(); !s.ok()) {
    LogShardEventf(shard_id, "final checkpoint failed: %s", s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  gradwire::DisableMutexDeadlockDetection();
  const sigset_t stop_signals = gradwire::BlockStopSignals();
  const gradwire::ServerOptions options =
      gradwire::ParseCommandLineOrExit(argc, argv);
  return gradwire::Run(options, stop_signals);
}
