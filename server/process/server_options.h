// The settings of one gradwire-server process, as the command line gives
// them, and their validation.
//
// Every field has a default that works on one machine. Numbers are signed so
// that a negative value from the command line reaches Validate and gets a
// clear message instead of wrapping around.
#ifndef GRADWIRE_SERVER_PROCESS_SERVER_OPTIONS_H_
#define GRADWIRE_SERVER_PROCESS_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/flags/metrics_flags.h"
#include "common/tls/transport_security.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"

namespace gradwire {

struct ServerOptions {
  // Address to bind; 0.0.0.0 listens on every IPv4 interface.
  std::string address = "0.0.0.0";
  // TCP port, in [0, 65535]; 0 lets the OS pick one.
  int64_t port = 0;
  // If set, the chosen port is written here (atomically) once listening.
  std::string port_file;
  // This shard's id, in [0, num_shards).
  int64_t shard_id = 0;
  // Shards of the job, >= 1.
  int64_t num_shards = 1;
  // Workers expected, >= 0; 0 accepts what Init declares.
  int64_t num_workers = 0;
  // "bsp", "asp", "ssp", or empty to accept what Init declares.
  std::string mode;
  // SSP staleness, >= 0; only with mode "ssp".
  int64_t staleness = 0;
  // Directory of checkpoints; empty disables them.
  std::string checkpoint_dir;
  // Optimizer updates between checkpoints, >= 0; 0 writes only at shutdown.
  int64_t checkpoint_every = 0;
  // Write-ahead log of accepted pushes in checkpoint_dir (write_ahead_log.h):
  // a killed shard then loses no acknowledged update. Without it (or
  // without checkpoint_dir) a SIGKILL loses the updates applied since the
  // last checkpoint. Has no effect without checkpoint_dir.
  bool wal = true;
  // fdatasync the log before each acknowledgement (survives power loss, not
  // only the process' death); needs checkpoint_dir and wal.
  bool wal_fsync = false;
  // When the durable state in checkpoint_dir cannot be read completely
  // (server/durability/durable_state.h), move it into a discarded-<unix
  // time>/ folder there and start fresh, instead of refusing to start.
  // Needs checkpoint_dir.
  bool discard_unreadable_state = false;
  // Also checkpoint once the current log segment holds this many bytes,
  // which bounds the log's size and the replay time; >= 0, 0 for no bound.
  int64_t wal_checkpoint_bytes = int64_t{256} << 20;
  // Threads that run Init, Push and GetInfo; 0: one per core (at least 2),
  // else in [1, 100000] (parameter_server_service.h).
  int64_t threads = 0;
  // Threads that run Pulls: at most this many Pulls wait for a step at
  // once; more queue without a thread. 0: DefaultPullThreads; else in
  // [1, 100000].
  int64_t pull_threads = 0;
  // Threads besides a Push's own that prepare and apply the chunks of one
  // push (ShardOptions::apply_threads); -1: one less than the usable
  // cores, else in [0, 1024].
  int64_t apply_threads = -1;
  // Calls one connection may have in flight (HTTP/2 streams), >= 1.
  int64_t max_concurrent_streams = 100;
  // The service's bounds (parameter_server_service.h), each in
  // [1, 100000000]: calls waiting in each pool's queue, calls one
  // connection holds (queued, running or its answer not yet sent), Pulls
  // one worker id runs at once.
  int64_t max_queued_calls = 4096;
  int64_t max_calls_per_connection = 256;
  int64_t max_waiting_pulls_per_worker = 8;
  // gRPC's memory for the buffers of every call together (a
  // grpc::ResourceQuota), >= 2 * max_message_bytes.
  int64_t memory_quota_bytes = int64_t{1} << 30;
  // Largest message received or sent, in [1 KiB, 2 GiB - 1].
  int64_t max_message_bytes = int64_t{64} << 20;
  // The shard's memory budget for decoded pushes, pull answers and kept
  // pull deltas, which the gRPC quota does not see,
  // >= 2 * max_message_bytes (ShardOptions::memory_budget_bytes).
  int64_t memory_budget_bytes = int64_t{4} << 30;
  // Most bytes the shard process may hold in all, >= -1: -1 detects it
  // (DetectMemoryLimitBytes, memory_limit.h), 0 sets none
  // (ShardOptions::memory_limit_bytes).
  int64_t memory_limit_bytes = -1;
  // Most chunks a first Init may declare to this shard, >= 1
  // (ShardOptions::max_chunks).
  int64_t max_chunks = 16384;
  // Most bytes a first Init may make the shard allocate beyond the model
  // data it carries, >= 1 (ShardOptions::max_init_overhead_bytes).
  int64_t max_init_overhead_bytes = int64_t{64} << 20;
  // ASP/SSP pull deltas: "shared" (published deltas) or "per-worker"
  // (replicas); ShardOptions::async_pull_deltas.
  std::string async_pull_deltas = "shared";
  // Shared ASP/SSP deltas: updates between two publications, >= 0 (0: the
  // number of workers); ShardOptions::async_publish_every.
  int64_t async_publish_every = 0;
  // ASP/SSP: most bytes of per-worker pull replicas, >= 0
  // (ShardOptions::max_replica_bytes).
  int64_t max_replica_bytes = int64_t{1} << 30;
  // How long a worker elected to send the initial values has, in (0, 86400]
  // seconds (ShardOptions::init_values_timeout).
  double init_values_timeout_seconds = 60.0;
  // How long the preferred provider of the initial values is waited for,
  // in [0, 3600] seconds (ShardOptions::init_preferred_grace).
  double init_preferred_grace_seconds = 1.0;
  // How long in-flight calls may run once shutdown starts, >= 0 seconds.
  double shutdown_grace_seconds = 10.0;
  // Seconds a worker may stay silent (no Init, Push or Pull; a waiting Pull
  // is not silence) before the shard drops it from the live set, so that
  // BSP steps go on without it (shard.h); in [0, 86400], 0 never drops.
  // The default, 30, stays below the 60 s a Pull may wait (kMaxPullWait),
  // so the other workers go on before their pulls give up, and far above
  // one step of a slow-but-alive worker.
  double worker_timeout_seconds = 30.0;
  // The Prometheus endpoint (--metrics-address, --metrics-port,
  // --metrics-port-file). The port defaults to 0, the OS picking one, so
  // that several shards on one machine never collide; the port file is
  // written before port_file.
  MetricsEndpointSettings metrics;
  // TLS, mutual TLS and the bearer token (--tls-cert, --tls-key, --tls-ca,
  // --tls-require-client-cert, --auth-token-file; see
  // common/tls/transport_security.h). All empty: plaintext, no token.
  TransportSecurityFiles transport;
  // One token per worker, "WORKER_ID TOKEN" lines (worker_tokens.h);
  // empty: none. With it, a worker may only Init, push and pull as itself.
  std::string worker_tokens_file;
};

// The consistency mode named `name` ("bsp", "asp", "ssp"; case-insensitive),
// UNSPECIFIED for "". INVALID_ARGUMENT naming the choices otherwise.
// "shared" or "per-worker" (any case); INVALID_ARGUMENT naming the flag
// otherwise.
absl::StatusOr<AsyncPullDeltas> ParseAsyncPullDeltas(absl::string_view name);

absl::StatusOr<v1::ConsistencyMode> ParseConsistencyMode(
    absl::string_view name);

// Checks every field against the ranges above and against each other
// (shard_id < num_shards; staleness only with ssp; a checkpoint cadence
// and discarding unreadable state only with a checkpoint directory; a metrics
// port file only with metrics; the transport's files readable and consistent,
// LoadTransportSecurity). INVALID_ARGUMENT naming the flag (as --flag-name) and
// the value on the first violation.
absl::Status ValidateServerOptions(const ServerOptions& options);

// The pull threads when options.pull_threads is 0: num_workers x
// max_waiting_pulls_per_worker, so that an honest job's allowed pulls never
// queue behind one another for a thread, at least kMinPullThreads (and
// kMinPullThreads when the worker count is left to Init, 0); at most
// 100000. options.pull_threads itself otherwise.
inline constexpr int64_t kMinPullThreads = 64;
int64_t PullThreads(const ServerOptions& options);

// The Shard's options. Requires ValidateServerOptions(options).ok().
ShardOptions ToShardOptions(const ServerOptions& options);

// options.shutdown_grace_seconds as a Duration.
absl::Duration ShutdownGrace(const ServerOptions& options);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_SERVER_OPTIONS_H_
