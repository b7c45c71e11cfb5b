#include "worker/parameter_sync.h"

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/grpc_ps_client.h"
#include "common/consistency/consistency_rule.h"
#include "common/heap_tuning.h"
#include "worker/chunk_pipeline.h"
#include "worker/chunk_plan.h"
#include "worker/dense_equivalent.h"
#include "worker/init_exchange.h"
#include "worker/init_requests.h"
#include "worker/local_group.h"
#include "worker/node_broadcast.h"
#include "worker/push_request_builder.h"
#include "worker/torch_errors.h"
#include "worker/training_defaults.h"
#include "worker/worker_metrics.h"

namespace gradwire {
namespace {

// How stale gradwire_worker_residual_norm may be: Prometheus scrapes every
// 5 s (deploy/prometheus/prometheus.yml), and a refresh reads every
// residual (about 1 ms of CPU per million parameters).
constexpr absl::Duration kResidualNormRefresh = absl::Seconds(5);

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Closes a step in the CPU account when destroyed: declared before Step()'s
// own scope, it runs after that scope has added its time.
struct CpuStepEnd {
  CpuAccount* account;
  ~CpuStepEnd() { account->EndStep(); }
};

// The worker's metrics label: local ranks of one node show up as
// "worker.rank".
std::string WorkerLabel(const SyncOptions& options) {
  return options.local.size > 1
             ? absl::StrFormat("%d.%d", options.client.worker_id,
                               options.local.rank)
             : absl::StrFormat("%d", options.client.worker_id);
}

// The worker's metrics in options.metrics_registry, or null without one.
absl::StatusOr<std::unique_ptr<WorkerMetrics>> MetricsFor(
    const SyncOptions& options) {
  if (options.metrics_registry == nullptr) {
    return std::unique_ptr<WorkerMetrics>();
  }
  return WorkerMetrics::Create(options.metrics_registry, WorkerLabel(options),
                               options.compressor.name);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterSync>> ParameterSync::Connect(
    SyncOptions options) {
  auto client = GrpcPsClient::Connect(options.shard_addresses, options.client);
  if (!client.ok()) return client.status();
  return Create(std::move(options), std::move(*client));
}

absl::StatusOr<std::unique_ptr<ParameterSync>> ParameterSync::Create(
    SyncOptions options, std::unique_ptr<PsClient> client) {
  const uint32_t worker_id = options.client.worker_id;
  if (options.num_workers == 0 || worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker id %d is outside [0, %d)", worker_id, options.num_workers));
  }
  if (client->num_shards() == 0) {
    return absl::InvalidArgumentError("no shard addresses");
  }
  auto push_builder = PushRequestBuilder::Create(
      options.compressor, options.error_feedback, options.worker_momentum,
      worker_id, options.compress_threads);
  if (!push_builder.ok()) return push_builder.status();
  auto metrics = MetricsFor(options);
  if (!metrics.ok()) return metrics.status();
  auto group = LocalGroup::Create(options.local);
  if (!group.ok()) return group.status();
  return std::unique_ptr<ParameterSync>(new ParameterSync(
      std::move(options), std::move(client), *std::move(group),
      *std::move(push_builder), *std::move(metrics)));
}

ParameterSync::ParameterSync(SyncOptions options,
                             std::unique_ptr<PsClient> client,
                             std::unique_ptr<LocalGroup> group,
                             std::unique_ptr<PushRequestBuilder> push_builder,
                             std::unique_ptr<WorkerMetrics> metrics)
    : options_(std::move(options)),
      client_(std::move(client)),
      group_(std::move(group)),
      push_builder_(std::move(push_builder)),
      rule_(MakeConsistencyRule(options_.training.mode(),
                                options_.training.staleness())),
      metrics_(std::move(metrics)) {
  push_builder_->set_cpu_account(&cpu_account_);
  // Cannot fail: no step is under way.
  SetPullAhead(options_.pull_ahead).IgnoreError();
}

ParameterSync::~ParameterSync() {
  // Pushes still queued and pulls still in flight would otherwise be
  // waited for up to their deadlines (a BSP pull waits for the slowest
  // worker, minutes by default) by the pipelines' destructors. Their
  // answers are no longer wanted: the pushes carry exactly-once keys, so
  // a cancelled one is either applied or not, never twice.
  if (step_announced_ || pulls_in_flight_) client_->CancelCalls();
}

absl::Status ParameterSync::Register(
    const torch::OrderedDict<std::string, torch::Tensor>& parameters) {
  NamedTensors named;
  for (const auto& item : parameters)
    named.emplace_back(item.key(), item.value());
  return Register(named);
}

absl::Status ParameterSync::Register(const NamedTensors& parameters) {
  return Register(parameters, {});
}

absl::Status ParameterSync::Register(const NamedTensors& parameters,
                                     std::vector<bool> uncompressed) {
  if (plan_) return absl::FailedPreconditionError("already registered");
  const absl::Time start = absl::Now();
  ChunkPlanOptions plan_options;
  plan_options.partition_bytes = options_.partition_bytes;
  plan_options.num_shards = client_->num_shards();
  plan_options.local_rank = options_.local.rank;
  plan_options.local_size = options_.local.size;
  plan_options.residual_spare = options_.residual_spare;
  plan_options.uncompressed = std::move(uncompressed);
  auto plan = ChunkPlan::Build(parameters, plan_options);
  if (!plan.ok()) return plan.status();
  AutoCompressionSetup setup;
  setup.budget_fraction = options_.auto_budget;
  setup.registry = options_.metrics_registry;
  setup.labels = {{"worker", WorkerLabel(options_)},
                  {"compressor", options_.compressor.name}};
  if (absl::Status s = push_builder_->PrepareFor(**plan, setup); !s.ok()) {
    return s;
  }
  plan_ = *std::move(plan);
  announced_.assign(plan_->parameters().size(), false);
  dense_equivalent_ =
      std::make_unique<DenseEquivalent>(*plan_, options_.client.worker_id);
  const absl::Status initialized = InitShards(start);
  // The initial values encoded for the shards are gone.
  ReleaseFreeHeapPages();
  // The first step's wire bytes count from here.
  wire_at_step_end_ = client_->wire_bytes();
  last_step_end_ = absl::Now();
  cpu_account_.StartSteps();
  return initialized;
}

absl::Status ParameterSync::InitShards(absl::Time register_start) {
  absl::StatusOr<InitExchange> exchange = ExchangeInit(
      client_.get(), plan_.get(), InitConfig(options_, plan_->partition()),
      options_.client.worker_id, options_.client.pull_timeout);
  if (!exchange.ok()) return exchange.status();
  // Resume where this worker's pushes stopped (non-zero after a shard
  // restarted from a checkpoint).
  step_ = ResumeStep(exchange->responses);
  stats_.init_bytes = client_->traffic().init_bytes_sent;
  // This local rank pulls what it handles of the chunks whose values
  // differ from the shards'; the node's broadcast spreads every chunk.
  std::vector<uint64_t> keys;
  for (const uint64_t key : exchange->keys_to_pull) {
    if (plan_->OwnsLocally(key)) keys.push_back(key);
  }
  const absl::Status landed =
      CatchTorch("gradwire register", [&]() -> absl::Status {
        torch::NoGradGuard no_grad;
        if (!keys.empty()) {
          if (absl::StatusOr<uint64_t> pulled = PullChunks(keys, 0);
              !pulled.ok()) {
            return pulled.status();
          }
        }
        return ShareInsideNode(*group_, *plan_);
      });
  const TrafficStats traffic = client_->traffic();
  stats_.startup_bytes_sent = traffic.init_bytes_sent + traffic.pull_bytes_sent;
  stats_.startup_bytes_received =
      traffic.init_bytes_received + traffic.pull_bytes_received;
  stats_.startup_seconds = SecondsSince(register_start);
  // The first step's wire bytes count from here, after the start-up pull.
  stats_.startup_wire = client_->wire_bytes();
  wire_at_step_end_ = stats_.startup_wire;
  if (metrics_) {
    metrics_->RecordTraffic(traffic);
    metrics_->SetStartup(
        stats_.startup_bytes_sent + stats_.startup_bytes_received,
        stats_.startup_seconds);
  }
  return landed;
}

absl::Status ParameterSync::Step(int epoch) {
  if (!plan_) return absl::FailedPreconditionError("Register first");
  const CpuStepEnd step_end{&cpu_account_};
  CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
  return CatchTorch("gradwire step", [&]() -> absl::Status {
    torch::NoGradGuard no_grad;
    const SyncStats before = stats_;
    const absl::Time step_start = absl::Now();
    NoteCompute(step_start);
    // The pulls of this step are in flight already when they were enqueued
    // as the pushes went (GradientReady with pull ahead).
    const bool pulled_ahead = step_announced_ && pull_pipeline_ != nullptr;
    if (absl::Status s =
            step_announced_ ? FinishOverlappedPush() : ReduceAndPush(epoch);
        !s.ok()) {
      return s;
    }
    if (!pulled_ahead) {
      KeepWeightsInGradients();
      const absl::Time pull_start = absl::Now();
      absl::StatusOr<uint64_t> min_clock =
          PullWeights(rule_->MinStepToPull(step_));
      const double pull_seconds = SecondsSince(pull_start);
      stats_.pull_seconds += pull_seconds;
      stats_.pull_wait_seconds += pull_seconds;
      if (!min_clock.ok()) return min_clock.status();
      NotePulled(step_, *min_clock);
    }
    const absl::Time share_start = absl::Now();
    if (absl::Status s = ShareInsideNode(*group_, *plan_, carried_); !s.ok()) {
      return s;
    }
    stats_.reduce_seconds += SecondsSince(share_start);
    ++step_;
    ++stats_.steps;
    const WireTotals wire = client_->wire_bytes();
    step_wire_bytes_ = WireDifference(wire, wire_at_step_end_);
    wire_at_step_end_ = wire;
    NoteWireRatio(before);
    if (metrics_) RecordStepMetrics(before, SecondsSince(step_start));
    last_step_end_ = absl::Now();
    return absl::OkStatus();
  });
}

absl::Status ParameterSync::StepCarrying(int epoch,
                                         const std::vector<uint32_t>& carried) {
  if (!plan_) return absl::FailedPreconditionError("Register first");
  if (step_announced_) {
    return absl::FailedPreconditionError(
        "a step carrying some tensors cannot follow gradients that overlap "
        "announced; call Step()");
  }
  const size_t count = plan_->parameters().size();
  std::vector<bool> mask(count, false);
  for (uint32_t index : carried) {
    if (index >= count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "carried tensor %d is out of range: %d tensors are registered", index,
          count));
    }
    mask[index] = true;
  }
  carried_ = std::move(mask);
  const absl::Status stepped = Step(epoch);
  carried_.clear();
  return stepped;
}

absl::Status ParameterSync::ReduceAndPush(int epoch) {
  if (absl::Status s = AwaitWeights(); !s.ok()) return s;
  const absl::Time start = absl::Now();
  std::vector<torch::Tensor> gradients;
  for (size_t i = 0; i < plan_->parameters().size(); ++i) {
    if (!Carries(i)) continue;
    const torch::Tensor& p = plan_->parameters()[i];
    // A parameter outside this step's graph has no gradient: it pushes
    // zeros, like every other worker's view of it.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    gradients.push_back(p.mutable_grad());
  }
  if (group_->size() > 1) {
    if (absl::Status s = group_->AllReduceMean(gradients); !s.ok()) return s;
  }
  stats_.reduce_seconds += SecondsSince(start);
  BeginPushes();
  PushTimings timings;
  const absl::Status pushed =
      CompressAndPush(plan_->AllOwnedKeys(), epoch, &timings);
  CountPushed(timings);
  return pushed;
}

void ParameterSync::RecordStepMetrics(const SyncStats& before,
                                      double step_seconds) {
  metrics_->RecordTraffic(client_->traffic());
  metrics_->RecordWire(wire_at_step_end_);
  metrics_->AddDenseEquivalentBytes(stats_.dense_equivalent_bytes -
                                    before.dense_equivalent_bytes);
  StepTimings timings;
  timings.step = step_seconds;
  timings.reduce = stats_.reduce_seconds - before.reduce_seconds;
  timings.compress = stats_.compress_seconds - before.compress_seconds;
  timings.push = stats_.push_seconds - before.push_seconds;
  timings.pull = stats_.pull_seconds - before.pull_seconds;
  timings.pull_wait = stats_.pull_wait_seconds - before.pull_wait_seconds;
  const absl::Time now = absl::Now();
  if (now - residual_norm_at_ >= kResidualNormRefresh) {
    residual_norm_ = plan_->ResidualNorm();
    residual_norm_at_ = now;
    metrics_->SetCompressionStateBytes(plan_->CompressionStateBytes());
  }
  metrics_->RecordStep(timings, residual_norm_);
  metrics_->RecordCpu(cpu_account_.Totals());
}

absl::Status ParameterSync::CompressAndPush(const std::vector<uint64_t>& keys,
                                            int epoch, PushTimings* timings) {
  absl::Time start = absl::Now();
  std::vector<v1::PushRequest> requests;
  if (absl::Status s = push_builder_->Build(keys, step_, epoch, plan_.get(),
                                            &requests, carried_);
      !s.ok()) {
    return s;
  }
  timings->compress_seconds += SecondsSince(start);
  start = absl::Now();
  const uint64_t sent = client_->traffic().push_bytes_sent;
  std::vector<v1::PushResponse> responses;
  absl::Status pushed;
  {
    CpuAccount::Scope scope(&cpu_account_, CpuActivity::kRpc);
    pushed = client_->Push(requests, &responses);
  }
  const double seconds = SecondsSince(start);
  timings->push_seconds += seconds;
  if (pushed.ok()) {
    NoteTransfer(client_->traffic().push_bytes_sent - sent, seconds);
  }
  return pushed;
}

void ParameterSync::CountPushed(const PushTimings& timings) {
  stats_.compress_seconds += timings.compress_seconds;
  stats_.push_seconds += timings.push_seconds;
  stats_.dense_equivalent_bytes += dense_equivalent_->StepBytes(step_);
  const TrafficStats traffic = client_->traffic();
  stats_.pushed_bytes = traffic.push_bytes_sent;
  stats_.retries = traffic.retries;
}

}  // namespace gradwire
