#include "worker/push_request_builder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "common/compress/auto/ratio_ladder.h"
#include "common/compress/kernels.h"
#include "common/compress/registry.h"
#include "common/usable_cpus.h"
#include "worker/host_chunk.h"
#include "worker/torch_errors.h"

namespace gradwire {

namespace {

// The compressor of chunks registered uncompressed: lossless, and an empty
// chunk costs a few bytes (DistributedOptimizer's buffers are zero on every
// worker but one).
std::unique_ptr<const Compressor> MakeUncompressed(NonFinitePolicy policy) {
  CompressorOptions options;
  options.name = "nonzero";
  options.precision = ValuePrecision::kFp32;
  options.non_finite = policy;
  auto made = MakeCompressor(options);
  return made.ok() ? *std::move(made) : nullptr;
}

// Under "auto", the compressor until the first choice: its starting rung.
absl::StatusOr<std::unique_ptr<Compressor>> MakeFixedCompressor(
    const CompressorOptions& options) {
  if (options.name != "auto") return MakeCompressor(options);
  return MakeCompressor(RungCompressorOptions(kStartRung, options));
}

// The sum of the squares of `values`, estimated for large chunks from
// one block of kNormBlock elements in every kNormStride (an eighth of the
// cache lines, scaled up), exact for small ones. The norms feed the
// chooser's shares between groups and the critical-phase detector's
// relative change, which an estimate from tens of thousands of elements
// serves as well; reading every element of the velocity and the residual
// again after the compressor has is two more passes over the model a step.
double EstimateSumOfSquares(absl::Span<const float> values) {
  constexpr size_t kNormBlock = 64;
  constexpr size_t kNormStride = 8 * kNormBlock;
  constexpr size_t kExactBelow = 64 * 1024;
  double lanes[compress_kernels::kSumLanes] = {};
  const auto sum_squares = compress_kernels::Kernels().sum_squares;
  if (values.size() < kExactBelow) {
    sum_squares(values.data(), true, values.size(), lanes);
    return compress_kernels::CombineLanes(lanes);
  }
  size_t counted = 0;
  for (size_t begin = 0; begin < values.size(); begin += kNormStride) {
    const size_t n = std::min(kNormBlock, values.size() - begin);
    sum_squares(values.data() + begin, true, n, lanes);
    counted += n;
  }
  return compress_kernels::CombineLanes(lanes) * values.size() / counted;
}

// Per registered tensor, the elements of its chunks this local rank pushes.
std::vector<uint64_t> OwnedNumel(const ChunkPlan& plan) {
  std::vector<uint64_t> numel(plan.partition().tensors().size(), 0);
  for (const ChunkSlot& slot : plan.slots()) {
    if (slot.uncompressed || !plan.OwnsLocally(slot.spec.key)) continue;
    numel[slot.spec.tensor_index] += slot.spec.numel;
  }
  return numel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PushRequestBuilder>> PushRequestBuilder::Create(
    const CompressorOptions& options, bool error_feedback,
    const MomentumCorrectionOptions& momentum, uint32_t worker_id,
    int compress_threads) {
  if (!error_feedback && (options.name == "dgc" || options.name == "auto")) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s needs error feedback", options.name));
  }
  if (momentum.enabled() && options.dgc.momentum > 0.0f) {
    return absl::InvalidArgumentError(
        "dgc's momentum correction and the optimizer's momentum on the "
        "worker would keep two velocities: use one");
  }
  auto compressor = MakeFixedCompressor(options);
  if (!compressor.ok()) return compressor.status();
  std::unique_ptr<const Compressor> warmup;
  if (momentum.dense_steps > 0) {
    CompressorOptions dense;
    dense.name = "none";
    dense.precision = ValuePrecision::kFp32;
    dense.non_finite = options.non_finite;
    auto made = MakeCompressor(dense);
    if (!made.ok()) return made.status();
    warmup = *std::move(made);
  }
  if (compress_threads < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compress_threads is %d; it must be 0 (one per core) or more",
        compress_threads));
  }
  const int threads = compress_threads == 0 ? UsableCpus() : compress_threads;
  return std::unique_ptr<PushRequestBuilder>(
      new PushRequestBuilder(options, *std::move(compressor), std::move(warmup),
                             error_feedback, momentum, worker_id, threads));
}

PushRequestBuilder::PushRequestBuilder(
    CompressorOptions options, std::unique_ptr<const Compressor> compressor,
    std::unique_ptr<const Compressor> warmup_compressor, bool error_feedback,
    MomentumCorrectionOptions momentum, uint32_t worker_id,
    int compress_threads)
    : options_(std::move(options)),
      compressor_(std::move(compressor)),
      uncompressed_(MakeUncompressed(options_.non_finite)),
      warmup_compressor_(std::move(warmup_compressor)),
      error_feedback_(error_feedback),
      momentum_(momentum),
      worker_id_(worker_id),
      // The building thread compresses too: one thread fewer.
      pool_(ThreadPoolOptions{/*threads=*/compress_threads - 1}) {}

absl::Status PushRequestBuilder::PrepareFor(const ChunkPlan& plan,
                                            const AutoCompressionSetup& setup) {
  if (options_.name == "auto") {
    AutoCompressionOptions options;
    options.base = options_;
    options.chooser.min_kept = options_.min_kept;
    options.chooser.precision = options_.precision;
    options.chooser.budget_fraction = setup.budget_fraction;
    options.registry = setup.registry;
    options.labels = setup.labels;
    std::vector<std::string> names;
    for (const TensorSpec& tensor : plan.partition().tensors()) {
      names.push_back(tensor.name);
    }
    std::vector<uint32_t> chunk_group;
    for (const ChunkSlot& slot : plan.slots()) {
      chunk_group.push_back(slot.spec.tensor_index);
    }
    auto made =
        AutoCompression::Create(std::move(options), std::move(names),
                                OwnedNumel(plan), std::move(chunk_group));
    if (!made.ok()) return made.status();
    auto_ = *std::move(made);
    // Every rung runs on the host, with the chunk's host residual.
    return absl::OkStatus();
  }
  // The device kernels keep no velocity: with momentum on the worker, CUDA
  // gradients go through the host.
  if (!plan.any_cuda() || momentum_.enabled()) return absl::OkStatus();
  auto device = DeviceChunkCompressor::Create(options_, error_feedback_);
  if (!device.ok()) return device.status();
  device_compressor_ = *std::move(device);
  return absl::OkStatus();
}

void PushRequestBuilder::BeginStep(uint64_t step, double learning_rate) {
  if (device_compressor_) device_compressor_->BeginStep();
  if (auto_) auto_->BeginStep(step, learning_rate);
}

const Compressor& PushRequestBuilder::HostCompressor(
    const ChunkSlot& slot) const {
  return auto_ ? auto_->CompressorFor(slot.spec.key) : *compressor_;
}

void PushRequestBuilder::NoteNorms(const ChunkSlot& slot,
                                   absl::Span<const float> values) {
  auto_->NoteChunkNorms(slot.spec.key, EstimateSumOfSquares(values),
                        EstimateSumOfSquares(slot.feedback.residual));
}

absl::Status PushRequestBuilder::Build(const std::vector<uint64_t>& keys,
                                       uint64_t step, int epoch,
                                       ChunkPlan* plan,
                                       std::vector<v1::PushRequest>* requests,
                                       const std::vector<bool>& carried) {
  CpuAccount::Scope scope(cpu_account_, CpuActivity::kEncode);
  requests->assign(plan->num_shards(), v1::PushRequest());
  for (v1::PushRequest& request : *requests) {
    request.set_worker_id(worker_id_);
    request.set_step(step);
  }
  CompressContext context;
  context.step = step;
  context.epoch = epoch;
  std::vector<v1::ChunkData> encoded(keys.size());
  std::vector<absl::Status> status(keys.size());
  const auto compress = [&](size_t i) {
    const ChunkSlot& slot = plan->slot(keys[i]);
    status[i] = carried.empty() || carried[slot.spec.tensor_index]
                    ? CompressAndEncode(keys[i], context, plan, &encoded[i])
                    : EncodeNothing(slot.spec, &encoded[i]);
  };
  if (device_compressor_) {
    // The device compressor queues on one stream: one chunk at a time.
    for (size_t i = 0; i < keys.size(); ++i) compress(i);
  } else {
    pool_.ParallelFor(keys.size(), compress);
  }
  // Requests in key order, as a serial run builds them; the first error in
  // that order is the one returned.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!status[i].ok()) return status[i];
    v1::ChunkGradient* pushed =
        (*requests)[plan->slot(keys[i]).spec.shard].add_chunks();
    pushed->set_key(keys[i]);
    pushed->mutable_gradient()->Swap(&encoded[i]);
  }
  return absl::OkStatus();
}

absl::Status PushRequestBuilder::CompressAndEncode(uint64_t key,
                                                   CompressContext context,
                                                   ChunkPlan* plan,
                                                   v1::ChunkData* encoded) {
  ChunkSlot& slot = plan->slot(key);
  const ChunkSpec& spec = slot.spec;
  // A retry of this step: its message goes again as it was (its residual
  // and velocities moved once already; ChunkSlot::scratch_step).
  if (slot.scratch_step == context.step) {
    CpuAccount::Scope scope(cpu_account_, CpuActivity::kEncode);
    return EncodeChunk(slot.scratch, encoded);
  }
  const torch::Tensor& parameter = plan->ParameterOf(spec);
  context.chunk_key = spec.key;
  slot.scratch_step = kNotCompressed;  // Overwritten from here on.
  absl::Status s = CatchTorch("gradwire push", [&] {
    CpuAccount::Scope scope(cpu_account_, CpuActivity::kCompress);
    return CompressChunk(parameter.grad(), context, &slot);
  });
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrFormat("chunk %d (%s): %s", spec.key,
                                        plan->NameOf(spec), s.message()));
  }
  slot.scratch_step = context.step;
  CpuAccount::Scope scope(cpu_account_, CpuActivity::kEncode);
  return EncodeChunk(slot.scratch, encoded);
}

absl::Status PushRequestBuilder::EncodeNothing(const ChunkSpec& spec,
                                               v1::ChunkData* encoded) const {
  CpuAccount::Scope scope(cpu_account_, CpuActivity::kEncode);
  CompressedChunk nothing;
  nothing.encoding = Encoding::kSparse;
  nothing.numel = spec.numel;
  return EncodeChunk(nothing, encoded);
}

absl::Status PushRequestBuilder::CompressChunk(const torch::Tensor& gradient,
                                               const CompressContext& context,
                                               ChunkSlot* slot) {
  const ChunkSpec& spec = slot->spec;
  if (!slot->uncompressed && error_feedback_) {
    KeepResidual(context.step, gradient, slot);
  }
  if (slot->uncompressed) {
    torch::Tensor host = ChunkView(gradient, spec.offset, spec.numel).cpu();
    return uncompressed_->Compress(HostChunk(host, 0, spec.numel), context,
                                   &slot->scratch);
  }
  if (gradient.device().is_cuda() && device_compressor_) {
    return device_compressor_->Compress(spec.key, gradient, spec.offset,
                                        spec.numel, context, &slot->scratch);
  }
  // CPU gradients are read in place; CUDA ones that do not compress on the
  // device are copied to the host first (a blocking copy).
  torch::Tensor host = gradient;
  uint64_t offset = spec.offset;
  if (gradient.device().is_cuda()) {
    CpuAccount::Scope scope(cpu_account_, CpuActivity::kCopy);
    host = ChunkView(gradient, spec.offset, spec.numel).cpu();
    offset = 0;
  }
  const absl::Span<const float> gradient_values =
      HostChunk(host, offset, spec.numel);
  absl::Span<const float> values = gradient_values;
  CompressContext compress_context = context;
  if (FusesMomentum(context)) {
    return CompressVelocity(gradient_values, context, slot);
  }
  if (momentum_.enabled()) {
    CpuAccount::Scope scope(cpu_account_, CpuActivity::kMomentum);
    if (absl::Status s =
            AccumulateVelocity(momentum_, options_.non_finite, values,
                               &slot->velocity, &slot->momentum_input, &values,
                               &compress_context.input_known_finite);
        !s.ok()) {
      return s;
    }
  }
  if (warmup_compressor_ && context.step < momentum_.dense_steps) {
    return warmup_compressor_->Compress(gradient_values, context,
                                        &slot->scratch);
  }
  const Compressor& compressor = HostCompressor(*slot);
  absl::Status compressed =
      error_feedback_
          ? compressor.CompressWithFeedback(values, compress_context,
                                            &slot->feedback, &slot->scratch)
          : compressor.Compress(values, compress_context, &slot->scratch);
  if (compressed.ok() && auto_) NoteNorms(*slot, values);
  if (compressed.ok() && momentum_.enabled()) {
    CpuAccount::Scope scope(cpu_account_, CpuActivity::kMomentum);
    MaskSentVelocity(momentum_, slot->scratch, absl::MakeSpan(slot->velocity));
  }
  return compressed;
}

void PushRequestBuilder::KeepResidual(uint64_t step,
                                      const torch::Tensor& gradient,
                                      ChunkSlot* slot) const {
  if (!keep_residuals_) {
    std::vector<float>().swap(slot->kept_residual);
    slot->kept_device_residual = torch::Tensor();
  }
  if (gradient.device().is_cuda() && device_compressor_) {
    // Undefined until the chunk's first push: zero, as an empty host one.
    const torch::Tensor residual = device_compressor_->residual(slot->spec.key);
    if (!keep_residuals_ && residual.defined()) return;
    slot->kept_device_residual =
        residual.defined() ? residual.clone() : torch::Tensor();
  } else {
    if (!keep_residuals_ && !slot->feedback.residual.empty()) return;
    // Assigning reuses the copy's buffer from step to step.
    slot->kept_residual = slot->feedback.residual;
    slot->kept_device_residual = torch::Tensor();
  }
  slot->kept_step = step;
}

int PushRequestBuilder::RestoreResiduals(uint64_t step, ChunkPlan* plan) {
  int missing = 0;
  for (ChunkSlot& slot : plan->slots()) {
    if (slot.uncompressed || !error_feedback_ || slot.scratch_step != step) {
      continue;
    }
    if (slot.kept_step != step) {
      ++missing;
      continue;
    }
    const torch::Tensor current =
        device_compressor_ ? device_compressor_->residual(slot.spec.key)
                           : torch::Tensor();
    if (current.defined() || slot.kept_device_residual.defined()) {
      device_compressor_->restore_residual(slot.spec.key,
                                           slot.kept_device_residual);
    } else {
      // The step's residual becomes the next copy's buffer.
      slot.feedback.residual.swap(slot.kept_residual);
    }
    slot.kept_device_residual = torch::Tensor();
    slot.kept_step = kNotCompressed;
  }
  return missing;
}

bool PushRequestBuilder::FusesMomentum(const CompressContext& context) const {
  return momentum_.enabled() && !momentum_.nesterov && error_feedback_ &&
         !(warmup_compressor_ && context.step < momentum_.dense_steps);
}

absl::Status PushRequestBuilder::CompressVelocity(
    absl::Span<const float> gradient, const CompressContext& context,
    ChunkSlot* slot) {
  // Momentum and error feedback in one call (one pass for Top-K): the time
  // counts as compression.
  const Compressor& compressor = HostCompressor(*slot);
  absl::Status compressed = compressor.CompressVelocityWithFeedback(
      gradient, momentum_.momentum, context, &slot->velocity, &slot->feedback,
      &slot->scratch);
  if (!compressed.ok()) return compressed;
  if (auto_) NoteNorms(*slot, slot->velocity);
  CpuAccount::Scope scope(cpu_account_, CpuActivity::kMomentum);
  MaskSentVelocity(momentum_, slot->scratch, absl::MakeSpan(slot->velocity));
  return absl::OkStatus();
}

}  // namespace gradwire
