// One shard served over gRPC: the Shard, its service, the health service,
// the checkpointer and the grpc::Server, started and stopped in order.
//
// Start:    restore the newest checkpoint if the checkpoint directory holds
//           one, replay the write-ahead log over it and start a new log
//           segment (unless --wal=false), refusing to start when that state
//           cannot be read completely, or moving it aside and starting
//           fresh with options.discard_unreadable_state
//           (server/durability/durable_state.h), start the metrics endpoint
//           (unless options.metrics.port is kMetricsOff), bind, start serving,
//           mark the health service SERVING (overall "" and
//           gradwire.v1.ParameterServer) and start the periodic checkpointer.
//           The options were validated by the caller.
// Liveness: with options.worker_timeout_seconds > 0, a watchdog drops the
//           workers silent for longer from the shard's live set
//           (worker_liveness.h); it starts once serving and stops first
//           at Shutdown.
// Shutdown: health NOT_SERVING; waiting Pulls end (UNAVAILABLE); new calls
//           are refused and in-flight ones get `shutdown grace` to finish,
//           then are cancelled; then the final checkpoint is written.
//
// gRPC settings: max receive and send message size are
// options.max_message_bytes (gRPC refuses a larger message with
// RESOURCE_EXHAUSTED before it reaches the service). The service's work
// runs on options.threads handler threads and options.pull_threads pull
// threads (parameter_server_service.h); calls beyond them queue without a
// thread. Each connection may carry options.max_concurrent_streams calls
// at once, and gRPC's buffers of all calls together are bounded by
// options.memory_quota_bytes (a grpc::ResourceQuota).
//
// Transport: options.transport decides the server credentials (plaintext,
// TLS or mutual TLS; common/tls/grpc_transport.h) and the bearer token
// gradwire.v1.ParameterServer requires (checked before a request is
// parsed). The health service never needs the token. Start logs one line naming
// both
// ("transport: TLS; auth token: on").
//
// Metrics: the shard's (shard_metrics.h) and the process' own
// (common/metrics/process_metrics.h), served at /metrics by an Exposer
// (common/metrics/exposer.h) with its own threads; it keeps serving until the
// ShardServer is destroyed, so a final scrape can follow Shutdown.
//
// Thread safety: Start and Shutdown are called by one thread; port(),
// metrics_port() and connect_address() are constant after Start.
#ifndef GRADWIRE_SERVER_PROCESS_SHARD_SERVER_H_
#define GRADWIRE_SERVER_PROCESS_SHARD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics/exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "grpcpp/grpcpp.h"
#include "server/durability/checkpointer.h"
#include "server/durability/write_ahead_log.h"
#include "server/process/parameter_server_service.h"
#include "server/process/server_options.h"
#include "server/shard/shard.h"
#include "server/shard/shard_metrics.h"
#include "server/shard/worker_liveness.h"

namespace gradwire {

// "host:port" for `address` and `port`, with IPv6 addresses bracketed.
std::string JoinHostPort(const std::string& address, int port);

// The address a client on this machine connects to when the server binds
// `address`: 127.0.0.1 for the wildcard 0.0.0.0, [::1] for ::, otherwise
// `address` itself.
std::string ConnectableHost(const std::string& address);

class ShardServer {
 public:
  // Starts serving `options` (which must pass ValidateServerOptions).
  // Errors: durable state that cannot be read or restored (DATA_LOSS when
  // it is damaged or does not fit together, naming the file; see
  // durable_state.h), a port (gRPC or metrics) that cannot be bound
  // (UNAVAILABLE naming the address).
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(
      const ServerOptions& options);

  // Shuts down without a final checkpoint if Shutdown was not called.
  ~ShardServer();
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  // The bound port (the OS's choice when options.port was 0).
  int port() const { return port_; }
  // ConnectableHost(address):port.
  std::string connect_address() const;
  // The bound metrics port, or 0 when metrics are off.
  int metrics_port() const { return exposer_ ? exposer_->port() : 0; }

  // Stops serving as described above and returns the final checkpoint's
  // status (OK when checkpoints are off or the shard was never
  // initialised). Call at most once.
  absl::Status Shutdown();

 private:
  ShardServer(const ServerOptions& options,
              std::unique_ptr<metrics::Registry> registry,
              std::unique_ptr<ShardMetrics> shard_metrics);
  // Opens the write-ahead log over the restored state and makes it the
  // shard's journal (nothing without a checkpoint directory or with
  // --wal=false).
  absl::Status StartWriteAheadLog();
  absl::Status ServeMetrics();
  absl::Status Serve();
  void SetServing(bool serving);

  // Constant after Start.
  const ServerOptions options_;
  const uint32_t shard_id_;
  int port_ = 0;

  // Declared before the shard, which counts into them, so they outlive it.
  const std::unique_ptr<metrics::Registry> registry_;
  const std::unique_ptr<ShardMetrics> shard_metrics_;

  // Null without a checkpoint directory or with --wal=false. Declared
  // before the shard that journals into it and the checkpointer that
  // rotates it.
  std::unique_ptr<WriteAheadLog> wal_;
  Shard shard_;
  // What the service heard from each worker, for the watchdog.
  WorkerActivity activity_;
  // Made by Serve, with the token the transport settings give.
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  // Null when checkpoints are off.
  std::unique_ptr<Checkpointer> checkpointer_;
  bool shut_down_ = false;
  // Drops silent workers (worker_liveness.h); null with
  // --worker-timeout-seconds=0. Destroyed before the shard it drops from.
  std::unique_ptr<LivenessWatchdog> watchdog_;

  // Scrape-time metrics and the endpoint, declared last so they are
  // destroyed first: no scrape runs once the shard starts to go away.
  std::unique_ptr<metrics::ProcessMetrics> process_metrics_;
  std::vector<std::unique_ptr<metrics::CallbackRegistration>> state_metrics_;
  std::unique_ptr<metrics::Exposer> exposer_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_SHARD_SERVER_H_
