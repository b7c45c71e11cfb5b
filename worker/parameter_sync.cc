#include "worker/parameter_sync.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "common/partition/partition.h"
#include "worker/device_chunks.h"
#include "worker/grpc_ps_client.h"
#include "worker/local_group.h"
#include "worker/push_pipeline.h"
#include "worker/worker_metrics.h"

namespace gradwire {

// Per-chunk state of this worker.
struct ParameterSync::ChunkSlot {
  ChunkSpec spec;
  FeedbackState feedback;
  CompressedChunk scratch;
  // Version of the weights this worker holds.
  uint64_t version = 0;
};

namespace {

// options.training with what the user left unset filled in (see
// SyncOptions::training): BSP, SGD at learning rate 0.01 with a constant
// schedule, and Top-K 5% fp32 deltas when pull_deltas asks for deltas.
v1::TrainingConfig TrainingWithDefaults(const SyncOptions& options) {
  v1::TrainingConfig config = options.training;
  if (config.mode() == v1::CONSISTENCY_MODE_UNSPECIFIED) {
    config.set_mode(v1::CONSISTENCY_MODE_BSP);
  }
  v1::OptimizerConfig* optimizer = config.mutable_optimizer();
  if (optimizer->kind() == v1::OPTIMIZER_KIND_UNSPECIFIED) {
    optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
  }
  if (optimizer->learning_rate() == 0) optimizer->set_learning_rate(0.01f);
  if (optimizer->schedule() == v1::LR_SCHEDULE_KIND_UNSPECIFIED) {
    optimizer->set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  }
  if (options.pull_deltas && config.pull_encoding().compressor().empty()) {
    v1::PullEncoding* encoding = config.mutable_pull_encoding();
    encoding->set_compressor("topk");
    encoding->set_ratio(0.05);
    encoding->set_value_type(v1::VALUE_TYPE_FP32);
  }
  return config;
}

// The version a worker reports when it holds nothing a delta applies to:
// no chunk reaches it, so the shard answers dense.
constexpr uint64_t kHoldsNothing = UINT64_MAX;

// Runs `body`, turning a libtorch exception into an absl::Status: no
// exception crosses the API.
template <typename Body>
absl::Status CatchTorch(const char* what, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrFormat("%s: %s", what, e.what()));
  }
}

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The float span of elements [offset, offset + numel) of a contiguous
// float32 CPU tensor.
absl::Span<float> SpanOf(const torch::Tensor& tensor, uint64_t offset,
                         uint64_t numel) {
  return absl::MakeSpan(tensor.data_ptr<float>() + offset, numel);
}

// The tensors' values on the host: CPU tensors as they are (no copy), CUDA
// ones copied. Throws as libtorch does.
std::vector<torch::Tensor> OnHost(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> host;
  for (const torch::Tensor& t : tensors) {
    host.push_back(t.device().is_cuda() ? t.cpu() : t);
  }
  return host;
}

// Copies chunk `spec` of `parameter` to elements [position, position +
// numel) of `flat`, or back when !to_flat. CPU to CPU without libtorch;
// anything on a CUDA device through a tensor copy.
void CopyChunk(const torch::Tensor& parameter, const ChunkSpec& spec,
               const torch::Tensor& flat, int64_t position, bool to_flat) {
  if (parameter.device().is_cpu() && flat.device().is_cpu()) {
    const auto chunk = SpanOf(parameter, spec.offset, spec.numel);
    float* buffer = flat.data_ptr<float>() + position;
    if (to_flat) {
      std::copy(chunk.begin(), chunk.end(), buffer);
    } else {
      std::copy(buffer, buffer + spec.numel, chunk.begin());
    }
    return;
  }
  torch::Tensor chunk = ChunkView(parameter, spec.offset, spec.numel);
  torch::Tensor part = flat.narrow(0, position, spec.numel);
  if (to_flat) {
    part.copy_(chunk);
  } else {
    chunk.copy_(part);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterSync>> ParameterSync::Connect(
    SyncOptions options) {
  ClientOptions client_options;
  client_options.worker_id = options.worker_id;
  client_options.rpc_timeout = options.rpc_timeout;
  client_options.pull_timeout = options.pull_timeout;
  client_options.connect_timeout = options.connect_timeout;
  client_options.transport = options.transport;
  auto client = GrpcPsClient::Connect(options.shard_addresses, client_options);
  if (!client.ok()) return client.status();
  return Create(std::move(options), std::move(*client));
}

absl::StatusOr<std::unique_ptr<ParameterSync>> ParameterSync::Create(
    SyncOptions options, std::unique_ptr<PsClient> client) {
  if (options.num_workers == 0 || options.worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker id %d is outside [0, %d)", options.worker_id,
                        options.num_workers));
  }
  if (client->num_shards() == 0) {
    return absl::InvalidArgumentError("no shard addresses");
  }
  if (!options.error_feedback && options.compressor.name == "dgc") {
    return absl::InvalidArgumentError("dgc needs error feedback");
  }
  auto compressor = MakeCompressor(options.compressor);
  if (!compressor.ok()) return compressor.status();
  LocalGroupOptions group_options;
  group_options.rank = options.local_rank;
  group_options.size = options.local_size;
  group_options.store_host = options.local_store_host;
  group_options.store_port = options.local_store_port;
  std::unique_ptr<WorkerMetrics> worker_metrics;
  if (options.metrics_registry != nullptr) {
    // Local ranks of one node show up as "worker.rank".
    const std::string worker =
        options.local_size > 1
            ? absl::StrFormat("%d.%d", options.worker_id, options.local_rank)
            : absl::StrFormat("%d", options.worker_id);
    auto made = WorkerMetrics::Create(options.metrics_registry, worker,
                                      options.compressor.name);
    if (!made.ok()) return made.status();
    worker_metrics = std::move(*made);
  }
  auto group = LocalGroup::Create(group_options);
  if (!group.ok()) return group.status();
  std::unique_ptr<ParameterSync> sync(new ParameterSync(
      std::move(options), std::move(client), std::move(*group)));
  sync->compressor_ = std::move(*compressor);
  sync->metrics_ = std::move(worker_metrics);
  return sync;
}

ParameterSync::ParameterSync(SyncOptions options,
                             std::unique_ptr<PsClient> client,
                             std::unique_ptr<LocalGroup> group)
    : options_(std::move(options)),
      client_(std::move(client)),
      group_(std::move(group)) {}

ParameterSync::~ParameterSync() = default;

bool ParameterSync::OwnsLocally(uint64_t key) const {
  return key % options_.local_size ==
         static_cast<uint64_t>(options_.local_rank);
}

absl::Status ParameterSync::Register(
    const torch::OrderedDict<std::string, torch::Tensor>& parameters) {
  NamedTensors named;
  for (const auto& item : parameters)
    named.emplace_back(item.key(), item.value());
  return Register(named);
}

absl::Status ParameterSync::Register(const NamedTensors& parameters) {
  if (partition_) return absl::FailedPreconditionError("already registered");
  std::vector<TensorSpec> specs;
  for (const auto& [name, tensor] : parameters) {
    if (tensor.scalar_type() != torch::kFloat32 || !tensor.is_contiguous() ||
        !(tensor.device().is_cpu() || tensor.device().is_cuda())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter %s must be a contiguous float32 CPU or CUDA tensor",
          name));
    }
    specs.push_back({name, static_cast<uint64_t>(tensor.numel())});
    parameters_.push_back(tensor);
  }
  const bool any_cuda =
      std::any_of(parameters_.begin(), parameters_.end(),
                  [](const torch::Tensor& t) { return t.device().is_cuda(); });
  if (any_cuda) {
    auto device = DeviceChunkCompressor::Create(options_.compressor,
                                                options_.error_feedback);
    if (!device.ok()) return device.status();
    device_compressor_ = std::move(*device);
  }
  PartitionOptions partition_options;
  partition_options.partition_bytes = options_.partition_bytes;
  partition_options.num_shards = client_->num_shards();
  auto partition = Partition::Build(std::move(specs), partition_options);
  if (!partition.ok()) return partition.status();
  partition_ = std::make_unique<Partition>(std::move(*partition));
  owned_keys_.assign(parameters_.size(), {});
  announced_.assign(parameters_.size(), false);
  for (const ChunkSpec& spec : partition_->chunks()) {
    ChunkSlot slot;
    slot.spec = spec;
    slots_.push_back(std::move(slot));
    if (OwnsLocally(spec.key)) {
      owned_keys_[spec.tensor_index].push_back(spec.key);
    }
  }
  return InitShards();
}

absl::Status ParameterSync::InitShards() {
  v1::TrainingConfig config = TrainingWithDefaults(options_);
  config.set_num_workers(options_.num_workers);
  config.set_num_shards(partition_->num_shards());
  config.set_partition_bytes(options_.partition_bytes);
  config.set_model_fingerprint(partition_->plan_fingerprint());
  const uint32_t shards = partition_->num_shards();
  std::vector<v1::InitRequest> requests(shards);
  dense_equivalent_.assign(shards, v1::PushRequest());
  for (uint32_t s = 0; s < shards; ++s) {
    requests[s].set_worker_id(options_.worker_id);
    requests[s].set_shard_id(s);
    *requests[s].mutable_config() = config;
    dense_equivalent_[s].set_worker_id(options_.worker_id);
  }
  std::vector<torch::Tensor> host_values;
  const absl::Status copied =
      CatchTorch("gradwire register", [&]() -> absl::Status {
        host_values = OnHost(parameters_);
        return absl::OkStatus();
      });
  if (!copied.ok()) return copied;
  for (ChunkSlot& slot : slots_) {
    const ChunkSpec& spec = slot.spec;
    v1::ChunkDeclaration* declaration = requests[spec.shard].add_chunks();
    declaration->set_key(spec.key);
    declaration->set_tensor_name(partition_->tensors()[spec.tensor_index].name);
    declaration->set_offset(spec.offset);
    CompressedChunk dense;
    dense.numel = spec.numel;
    const auto values =
        SpanOf(host_values[spec.tensor_index], spec.offset, spec.numel);
    dense.values.assign(values.begin(), values.end());
    if (absl::Status s = EncodeChunk(dense, declaration->mutable_initial());
        !s.ok()) {
      return s;
    }
    if (OwnsLocally(spec.key)) {
      v1::ChunkGradient* chunk = dense_equivalent_[spec.shard].add_chunks();
      chunk->set_key(spec.key);
      dense.values.assign(spec.numel, 0.0f);
      EncodeChunk(dense, chunk->mutable_gradient()).IgnoreError();
    }
  }
  std::vector<v1::InitResponse> responses;
  if (absl::Status s = client_->Init(requests, &responses); !s.ok()) return s;
  // The first Init's values won: pull them, and resume where this worker's
  // pushes stopped (non-zero after a shard restarted from a checkpoint).
  uint64_t resume = UINT64_MAX;
  for (const v1::InitResponse& response : responses) {
    for (uint64_t next : response.next_steps()) resume = std::min(resume, next);
  }
  step_ = resume == UINT64_MAX ? 0 : resume;
  stats_.init_bytes = client_->traffic().init_bytes_sent;
  if (metrics_) metrics_->RecordTraffic(client_->traffic());
  for (ChunkSlot& slot : slots_) slot.version = kHoldsNothing;
  return CatchTorch("gradwire register", [&]() -> absl::Status {
    torch::NoGradGuard no_grad;
    if (absl::Status s = PullWeights(/*min_step=*/0); !s.ok()) return s;
    return ShareInsideNode();
  });
}

uint64_t ParameterSync::MinStepToPull() const {
  // Called after pushing step_: what the consistency mode waits for.
  switch (options_.training.mode()) {
    case v1::CONSISTENCY_MODE_ASP:
      return 0;
    case v1::CONSISTENCY_MODE_SSP: {
      const uint64_t staleness = options_.training.staleness();
      return step_ + 1 > staleness ? step_ + 1 - staleness : 0;
    }
    default:
      return step_ + 1;
  }
}

absl::Status ParameterSync::Step(int epoch) {
  if (!partition_) return absl::FailedPreconditionError("Register first");
  return CatchTorch("gradwire step", [&]() -> absl::Status {
    torch::NoGradGuard no_grad;
    const SyncStats before = stats_;
    const absl::Time step_start = absl::Now();
    absl::Time start = step_start;
    if (step_announced_) {
      if (absl::Status s = FinishOverlappedPush(); !s.ok()) return s;
    } else {
      for (torch::Tensor& p : parameters_) {
        // A parameter outside this step's graph has no gradient: it pushes
        // zeros, like every other worker's view of it.
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      }
      if (group_->size() > 1) {
        std::vector<torch::Tensor> gradients;
        for (torch::Tensor& p : parameters_)
          gradients.push_back(p.mutable_grad());
        if (absl::Status s = group_->AllReduceMean(gradients); !s.ok())
          return s;
      }
      stats_.reduce_seconds += SecondsSince(start);
      if (absl::Status s = PushGradients(epoch); !s.ok()) return s;
    }
    if (absl::Status s = PullWeights(MinStepToPull()); !s.ok()) return s;
    if (step_ + 1 > pulled_min_clock_) {
      stats_.max_step_lead =
          std::max(stats_.max_step_lead, step_ + 1 - pulled_min_clock_);
    }
    start = absl::Now();
    if (absl::Status s = ShareInsideNode(); !s.ok()) return s;
    stats_.reduce_seconds += SecondsSince(start);
    ++step_;
    ++stats_.steps;
    if (metrics_) RecordStepMetrics(before, SecondsSince(step_start));
    return absl::OkStatus();
  });
}

void ParameterSync::RecordStepMetrics(const SyncStats& before,
                                      double step_seconds) {
  metrics_->RecordTraffic(client_->traffic());
  metrics_->AddDenseEquivalentBytes(stats_.dense_equivalent_bytes -
                                    before.dense_equivalent_bytes);
  StepTimings timings;
  timings.step = step_seconds;
  timings.reduce = stats_.reduce_seconds - before.reduce_seconds;
  timings.compress = stats_.compress_seconds - before.compress_seconds;
  timings.push = stats_.push_seconds - before.push_seconds;
  timings.pull = stats_.pull_seconds - before.pull_seconds;
  metrics_->RecordStep(timings, ResidualNorm());
}

double ParameterSync::ResidualNorm() const {
  // Host residuals only; residuals kept on a CUDA device are not read back
  // for a gauge.
  double sum_of_squares = 0;
  for (const ChunkSlot& slot : slots_) {
    for (const float r : slot.feedback.residual)
      sum_of_squares += double{r} * r;
  }
  return std::sqrt(sum_of_squares);
}

absl::Status ParameterSync::GradientReady(size_t index, int epoch) {
  if (!partition_) return absl::FailedPreconditionError("Register first");
  if (index >= parameters_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "parameter index %d is outside [0, %d)", index, parameters_.size()));
  }
  if (group_->size() > 1) {
    return absl::FailedPreconditionError(
        "overlap needs local_size 1: local ranks reduce whole steps");
  }
  if (announced_[index]) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the gradient of %s was already pushed in step %d; call Step() "
        "before the next backward pass",
        partition_->tensors()[index].name, step_));
  }
  if (!pipeline_) {
    pipeline_ = std::make_unique<PushPipeline>(
        [this](const std::vector<uint64_t>& keys) {
          return CompressAndPush(keys, overlap_epoch_, &overlap_timings_);
        });
  }
  if (!step_announced_) {
    // The first announcement of a step: nothing is queued, the pipeline
    // thread is idle, and these fields are the caller's to set.
    step_announced_ = true;
    overlap_epoch_ = epoch;
    overlap_timings_ = PushTimings();
    if (device_compressor_) device_compressor_->BeginStep();
  }
  announced_[index] = true;
  pipeline_->Enqueue(owned_keys_[index]);
  return absl::OkStatus();
}

absl::Status ParameterSync::FinishOverlappedPush() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (announced_[i]) continue;
    torch::Tensor& p = parameters_[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    announced_[i] = true;
    pipeline_->Enqueue(owned_keys_[i]);
  }
  const absl::Status pushed = pipeline_->Drain();
  announced_.assign(parameters_.size(), false);
  step_announced_ = false;
  CountPushed(overlap_timings_);
  return pushed;
}

absl::Status ParameterSync::PushGradients(int epoch) {
  if (device_compressor_) device_compressor_->BeginStep();
  std::vector<uint64_t> keys;
  for (const std::vector<uint64_t>& owned : owned_keys_) {
    keys.insert(keys.end(), owned.begin(), owned.end());
  }
  std::sort(keys.begin(), keys.end());
  PushTimings timings;
  const absl::Status pushed = CompressAndPush(keys, epoch, &timings);
  CountPushed(timings);
  return pushed;
}

absl::Status ParameterSync::CompressAndPush(const std::vector<uint64_t>& keys,
                                            int epoch, PushTimings* timings) {
  absl::Time start = absl::Now();
  const uint32_t shards = partition_->num_shards();
  std::vector<v1::PushRequest> requests(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    requests[s].set_worker_id(options_.worker_id);
    requests[s].set_step(step_);
  }
  CompressContext context;
  context.step = step_;
  context.epoch = epoch;
  for (const uint64_t key : keys) {
    ChunkSlot& slot = slots_[key];
    const ChunkSpec& spec = slot.spec;
    const torch::Tensor& parameter = parameters_[spec.tensor_index];
    context.chunk_key = spec.key;
    absl::Status s = CatchTorch("gradwire push", [&] {
      return CompressChunk(parameter.grad(), context, &slot);
    });
    if (!s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrFormat("chunk %d (%s): %s", spec.key,
                          partition_->tensors()[spec.tensor_index].name,
                          s.message()));
    }
    v1::ChunkGradient* pushed = requests[spec.shard].add_chunks();
    pushed->set_key(spec.key);
    if (absl::Status e = EncodeChunk(slot.scratch, pushed->mutable_gradient());
        !e.ok()) {
      return e;
    }
  }
  timings->compress_seconds += SecondsSince(start);
  start = absl::Now();
  std::vector<v1::PushResponse> responses;
  absl::Status pushed = client_->Push(requests, &responses);
  timings->push_seconds += SecondsSince(start);
  return pushed;
}

void ParameterSync::CountPushed(const PushTimings& timings) {
  stats_.compress_seconds += timings.compress_seconds;
  stats_.push_seconds += timings.push_seconds;
  for (uint32_t s = 0; s < partition_->num_shards(); ++s) {
    if (dense_equivalent_[s].chunks().empty()) continue;
    dense_equivalent_[s].set_step(step_);
    stats_.dense_equivalent_bytes += dense_equivalent_[s].ByteSizeLong();
  }
  const TrafficStats traffic = client_->traffic();
  stats_.pushed_bytes = traffic.push_bytes_sent;
  stats_.retries = traffic.retries;
}

absl::Status ParameterSync::CompressChunk(const torch::Tensor& gradient,
                                          const CompressContext& context,
                                          ChunkSlot* slot) {
  const ChunkSpec& spec = slot->spec;
  if (gradient.device().is_cuda() && device_compressor_) {
    return device_compressor_->Compress(spec.key, gradient, spec.offset,
                                        spec.numel, context, &slot->scratch);
  }
  // CPU gradients are read in place; CUDA ones that do not compress on the
  // device are copied to the host first (a blocking copy).
  torch::Tensor host = gradient;
  uint64_t offset = spec.offset;
  if (gradient.device().is_cuda()) {
    host = ChunkView(gradient, spec.offset, spec.numel).cpu();
    offset = 0;
  }
  const auto values = SpanOf(host, offset, spec.numel);
  return options_.error_feedback
             ? compressor_->CompressWithFeedback(
                   values, context, &slot->feedback, &slot->scratch)
             : compressor_->Compress(values, context, &slot->scratch);
}

absl::Status ParameterSync::PullWeights(uint64_t min_step) {
  const absl::Time start = absl::Now();
  const uint32_t shards = partition_->num_shards();
  std::vector<v1::PullRequest> requests(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    requests[s].set_worker_id(options_.worker_id);
    requests[s].set_allow_delta(options_.pull_deltas);
  }
  for (const ChunkSlot& slot : slots_) {
    if (!OwnsLocally(slot.spec.key)) continue;
    v1::ChunkPull* pull = requests[slot.spec.shard].add_chunks();
    pull->set_key(slot.spec.key);
    pull->set_have_version(slot.version);
    pull->set_min_step(min_step);
  }
  std::vector<v1::PullResponse> responses;
  absl::Status pulled = client_->Pull(requests, &responses);
  if (pulled.ok()) pulled = ApplyPulled(responses);
  stats_.pull_seconds += SecondsSince(start);
  stats_.pulled_bytes = client_->traffic().pull_bytes_received;
  return pulled;
}

absl::Status ParameterSync::ApplyPulled(
    const std::vector<v1::PullResponse>& responses) {
  CompressedChunk decoded;
  pulled_min_clock_ = UINT64_MAX;
  for (const v1::PullResponse& response : responses) {
    for (const v1::ChunkWeights& weights : response.chunks()) {
      pulled_min_clock_ = std::min(pulled_min_clock_, weights.clock());
      if (weights.key() >= slots_.size()) {
        return absl::InternalError(
            absl::StrFormat("shard answered unknown chunk %d", weights.key()));
      }
      ChunkSlot& slot = slots_[weights.key()];
      const ChunkSpec& spec = slot.spec;
      DecodeOptions decode;
      decode.expected_numel = spec.numel;
      if (absl::Status s = DecodeChunk(weights.data(), decode, &decoded);
          !s.ok()) {
        return absl::Status(s.code(), absl::StrFormat("pulled chunk %d: %s",
                                                      spec.key, s.message()));
      }
      if (weights.is_delta() && slot.version + 1 != weights.version() &&
          slot.version != weights.version()) {
        return absl::InternalError(
            absl::StrFormat("chunk %d: delta to version %d for a worker at %d",
                            spec.key, weights.version(), slot.version));
      }
      const torch::Tensor& parameter = parameters_[spec.tensor_index];
      if (parameter.device().is_cuda()) {
        WriteChunkToDevice(decoded, weights.is_delta(), parameter, spec.offset);
        slot.version = weights.version();
        continue;
      }
      auto target = SpanOf(parameter, spec.offset, spec.numel);
      if (weights.is_delta()) {
        AccumulateInto(decoded, 1.0f, target);
      } else {
        DecompressInto(decoded, target);
      }
      slot.version = weights.version();
    }
  }
  return absl::OkStatus();
}

absl::Status ParameterSync::ShareInsideNode() {
  if (group_->size() <= 1) return absl::OkStatus();
  // Each local rank pulled the chunks it owns; every rank broadcasts its own
  // in one flat buffer.
  for (int root = 0; root < group_->size(); ++root) {
    std::vector<const ChunkSlot*> owned;
    int64_t total = 0;
    for (const ChunkSlot& slot : slots_) {
      if (slot.spec.key % group_->size() != static_cast<uint64_t>(root))
        continue;
      owned.push_back(&slot);
      total += slot.spec.numel;
    }
    if (owned.empty()) continue;
    // On the parameters' device: Gloo for CPU, NCCL for CUDA.
    const torch::Device device =
        parameters_[owned.front()->spec.tensor_index].device();
    torch::Tensor flat = torch::empty(
        {total}, torch::TensorOptions(torch::kFloat32).device(device));
    if (root == group_->rank()) {
      int64_t position = 0;
      for (const ChunkSlot* slot : owned) {
        CopyChunk(parameters_[slot->spec.tensor_index], slot->spec, flat,
                  position, /*to_flat=*/true);
        position += slot->spec.numel;
      }
    }
    std::vector<torch::Tensor> buffers = {flat};
    if (absl::Status s = group_->Broadcast(buffers, root); !s.ok()) return s;
    int64_t position = 0;
    for (const ChunkSlot* slot : owned) {
      CopyChunk(parameters_[slot->spec.tensor_index], slot->spec, flat,
                position, /*to_flat=*/false);
      position += slot->spec.numel;
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire
