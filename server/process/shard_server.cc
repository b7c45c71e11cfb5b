#include "server/process/shard_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/tls/grpc_transport.h"
#include "common/usable_cpus.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "server/durability/durable_state.h"
#include "server/shard/stderr_log.h"

#ifdef GRADWIRE_HAVE_GRPC_REFLECTION
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#endif

namespace gradwire {
namespace {

// Handler threads when --threads is 0: one per CPU the process may use
// (affinity and cgroup quota, not the host's cores), at least 2, so that a
// push can be applied while another writes the log.
int DefaultHandlerThreads(const UsableCpuCount& cpus) {
  return std::max(2, cpus.cpus);
}

// Per-connection stream limit and the memory quota of gRPC's buffers.
void ApplyResourceBounds(const ServerOptions& options,
                         grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              static_cast<int>(options.max_concurrent_streams));
  grpc::ResourceQuota quota("gradwire-server");
  quota.Resize(static_cast<size_t>(options.memory_quota_bytes));
  builder->SetResourceQuota(quota);
}

// Removes gRPC's reflection service from one server: with a token, the
// reflection service, which is registered apart from
// gradwire.v1.ParameterServer, would describe the API to callers without
// one. (The plugin's registration is process-wide; this keeps it off per
// server.)
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

// The service's settings: the transport's shared token, the per-worker
// tokens read from --worker-tokens-file, the call pools (handler threads
// sized from `cpus` unless --threads names them) and the request bounds.
absl::StatusOr<ParameterServerServiceOptions> ServiceOptionsFor(
    const ServerOptions& options, const TransportSecurity& security,
    const UsableCpuCount& cpus) {
  ParameterServerServiceOptions service;
  service.auth_token = security.auth_token;
  if (!options.worker_tokens_file.empty()) {
    absl::StatusOr<WorkerTokens> tokens =
        LoadWorkerTokens(options.worker_tokens_file);
    if (!tokens.ok()) return tokens.status();
    service.worker_tokens = *std::move(tokens);
  }
  service.handler_threads = options.threads > 0
                                ? static_cast<int>(options.threads)
                                : DefaultHandlerThreads(cpus);
  service.pull_threads = static_cast<int>(PullThreads(options));
  service.max_queued_calls = options.max_queued_calls;
  service.max_calls_per_connection = options.max_calls_per_connection;
  service.max_waiting_pulls_per_worker = options.max_waiting_pulls_per_worker;
  service.max_chunk_entries = static_cast<uint64_t>(options.max_chunks);
  return service;
}

}  // namespace

std::string JoinHostPort(const std::string& address, int port) {
  if (absl::StrContains(address, ':') && !absl::StartsWith(address, "[")) {
    return absl::StrFormat("[%s]:%d", address, port);
  }
  return absl::StrFormat("%s:%d", address, port);
}

std::string ConnectableHost(const std::string& address) {
  if (address == "0.0.0.0") return "127.0.0.1";
  if (address == "::" || address == "[::]") return "::1";
  return address;
}

ShardServer::ShardServer(const ServerOptions& options,
                         std::unique_ptr<metrics::Registry> registry,
                         std::unique_ptr<ShardMetrics> shard_metrics)
    : options_(options),
      shard_id_(static_cast<uint32_t>(options.shard_id)),
      registry_(std::move(registry)),
      shard_metrics_(std::move(shard_metrics)),
      shard_(ToShardOptions(options), shard_metrics_.get()) {}

ShardServer::~ShardServer() {
  if (shut_down_ || server_ == nullptr) return;
  service_->BeginShutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  service_->StopPools();
}

std::string ShardServer::connect_address() const {
  return JoinHostPort(ConnectableHost(options_.address), port_);
}

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(
    const ServerOptions& options) {
  const uint32_t shard_id = static_cast<uint32_t>(options.shard_id);
  LogShardEventf(shard_id, "starting: shard %d of %d, mode %s",
                 options.shard_id, options.num_shards,
                 options.mode.empty() ? "from Init" : options.mode);
  std::unique_ptr<ShardServer> server;
  // A new server each call: a restore that failed may have left part of the
  // state in the previous one's shard.
  auto fresh_shard = [&]() -> absl::StatusOr<Shard*> {
    server.reset();
    auto registry = std::make_unique<metrics::Registry>();
    auto shard_metrics = ShardMetrics::Create(registry.get(), shard_id);
    if (!shard_metrics.ok()) return shard_metrics.status();
    server.reset(new ShardServer(options, std::move(registry),
                                 *std::move(shard_metrics)));
    return &server->shard_;
  };
  if (options.checkpoint_dir.empty()) {
    if (absl::StatusOr<Shard*> s = fresh_shard(); !s.ok()) return s.status();
  } else {
    DurableStateOptions durable;
    durable.dir = options.checkpoint_dir;
    durable.shard_id = shard_id;
    durable.replay_log = options.wal;
    durable.discard_unreadable = options.discard_unreadable_state;
    durable.num_workers = static_cast<uint32_t>(options.num_workers);
    absl::StatusOr<RestoredDurableState> restored =
        RestoreOrDiscardDurableState(durable, fresh_shard);
    if (absl::IsDataLoss(restored.status())) {
      // Says what the operator can do, on the same line.
      return absl::DataLossError(absl::StrCat(
          restored.status().message(),
          " (--discard-unreadable-state moves the checkpoint and log files "
          "aside and starts fresh)"));
    }
    if (!restored.ok()) return restored.status();
  }
  if (absl::Status s = server->StartWriteAheadLog(); !s.ok()) return s;
  if (absl::Status s = server->ServeMetrics(); !s.ok()) return s;
  if (absl::Status s = server->Serve(); !s.ok()) return s;
  if (options.worker_timeout_seconds > 0) {
    server->watchdog_ = std::make_unique<LivenessWatchdog>(
        &server->shard_, &server->activity_,
        absl::Seconds(options.worker_timeout_seconds));
  }
  if (!options.checkpoint_dir.empty()) {
    CheckpointerOptions checkpoints;
    checkpoints.dir = options.checkpoint_dir;
    checkpoints.every_updates = static_cast<uint64_t>(options.checkpoint_every);
    checkpoints.shard_id = server->shard_id_;
    checkpoints.wal = server->wal_.get();
    checkpoints.wal_checkpoint_bytes =
        static_cast<uint64_t>(options.wal_checkpoint_bytes);
    server->checkpointer_ =
        std::make_unique<Checkpointer>(&server->shard_, std::move(checkpoints));
  }
  return server;
}

absl::Status ShardServer::StartWriteAheadLog() {
  if (options_.checkpoint_dir.empty()) return absl::OkStatus();
  if (!options_.wal) {
    LogShardEventf(shard_id_,
                   "write-ahead log off: a kill loses the updates applied "
                   "since the last checkpoint");
    return absl::OkStatus();
  }
  WriteAheadLogOptions wal;
  wal.dir = options_.checkpoint_dir;
  wal.fsync = options_.wal_fsync;
  wal.shard_id = shard_id_;
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> opened =
      WriteAheadLog::Open(std::move(wal));
  if (!opened.ok()) return opened.status();
  wal_ = *std::move(opened);
  shard_.set_journal(wal_.get());
  LogShardEventf(shard_id_, "write-ahead log on (%s): segment %d",
                 options_.wal_fsync ? "fdatasync before each ack"
                                    : "written before each ack",
                 wal_->generation());
  return absl::OkStatus();
}

absl::Status ShardServer::ServeMetrics() {
  auto process = metrics::ProcessMetrics::Register(registry_.get());
  if (!process.ok()) return process.status();
  process_metrics_ = *std::move(process);
  auto state = RegisterShardStateMetrics(registry_.get(), &shard_);
  if (!state.ok()) return state.status();
  state_metrics_ = *std::move(state);
  if (options_.metrics.port == kMetricsOff) {
    LogShardEventf(shard_id_, "metrics endpoint off (--metrics-port=-1)");
    return absl::OkStatus();
  }
  metrics::ExposerOptions endpoint;
  endpoint.address = options_.metrics.address;
  endpoint.port = static_cast<int>(options_.metrics.port);
  auto exposer = metrics::Exposer::Start(endpoint, registry_.get());
  if (!exposer.ok()) return exposer.status();
  exposer_ = *std::move(exposer);
  LogShardEventf(shard_id_, "metrics at http://%s/metrics",
                 JoinHostPort(options_.metrics.address, exposer_->port()));
  return absl::OkStatus();
}

absl::Status ShardServer::Serve() {
  grpc::EnableDefaultHealthCheckService(true);
#ifdef GRADWIRE_HAVE_GRPC_REFLECTION
  // Lets grpcurl and grpc_cli discover the service without the .proto.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
#endif
  grpc::ServerBuilder builder;
  const std::string listen =
      JoinHostPort(options_.address, static_cast<int>(options_.port));
  // gRPC sets SO_REUSEPORT by default, which would let a second shard bind
  // the same port and silently share its traffic; a taken port must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  absl::StatusOr<TransportSecurity> security =
      LoadTransportSecurity(options_.transport, TransportRole::kServer);
  if (!security.ok()) return security.status();
  builder.AddListeningPort(listen, ServerCredentialsFor(*security), &port_);
  const bool token_required =
      !security->auth_token.empty() || !options_.worker_tokens_file.empty();
  if (token_required) builder.SetOption(std::make_unique<WithoutReflection>());
  const UsableCpuCount cpus = CountUsableCpus();
  absl::StatusOr<ParameterServerServiceOptions> service_options =
      ServiceOptionsFor(options_, *security, cpus);
  if (!service_options.ok()) return service_options.status();
  const ParameterServerServiceOptions& service = *service_options;
  service_ =
      std::make_unique<ParameterServerService>(&shard_, &activity_, service);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  ApplyResourceBounds(options_, &builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen, " (address in use or not local?)"));
  }
  SetServing(true);
  LogShardEventf(shard_id_,
                 "listening on %s (max message %d bytes; %d handler and %d "
                 "pull threads, %d streams per connection; %d usable CPUs: "
                 "%s; memory budget %d bytes)",
                 JoinHostPort(options_.address, port_),
                 options_.max_message_bytes, service.handler_threads,
                 service.pull_threads, options_.max_concurrent_streams,
                 cpus.cpus, cpus.why, options_.memory_budget_bytes);
  LogShardEventf(
      shard_id_, "transport: %s; auth token: %s; worker tokens: %s",
      DescribeTransport(*security), DescribeAuthToken(*security),
      service.worker_tokens.tokens.empty()
          ? std::string("off")
          : absl::StrFormat("%d workers", service.worker_tokens.tokens.size()));
  return absl::OkStatus();
}

void ShardServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  health->SetServingStatus(v1::ParameterServer::service_full_name(), serving);
}

absl::Status ShardServer::Shutdown() {
  shut_down_ = true;
  const absl::Duration grace = ShutdownGrace(options_);
  LogShardEventf(shard_id_, "shutting down (grace %s)",
                 absl::FormatDuration(grace));
  // Workers fall silent while the server goes away: nobody is dropped now.
  watchdog_.reset();
  SetServing(false);
  service_->BeginShutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  service_->StopPools();
  absl::Status final_checkpoint = absl::OkStatus();
  if (checkpointer_ != nullptr)
    final_checkpoint = checkpointer_->StopAndWriteFinal();
  LogShardEventf(shard_id_, "shut down after %d optimizer updates",
                 shard_.updates_applied());
  return final_checkpoint;
}

}  // namespace gradwire
