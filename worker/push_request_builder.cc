#include "worker/push_request_builder.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "common/compress/registry.h"
#include "worker/host_chunk.h"
#include "worker/torch_errors.h"

namespace gradwire {

absl::StatusOr<std::unique_ptr<PushRequestBuilder>> PushRequestBuilder::Create(
    const CompressorOptions& options, bool error_feedback,
    const MomentumCorrectionOptions& momentum, uint32_t worker_id) {
  if (!error_feedback && options.name == "dgc") {
    return absl::InvalidArgumentError("dgc needs error feedback");
  }
  if (momentum.enabled() && options.dgc.momentum > 0.0f) {
    return absl::InvalidArgumentError(
        "dgc's momentum correction and the optimizer's momentum on the "
        "worker would keep two velocities: use one");
  }
  auto compressor = MakeCompressor(options);
  if (!compressor.ok()) return compressor.status();
  return std::unique_ptr<PushRequestBuilder>(new PushRequestBuilder(
      options, *std::move(compressor), error_feedback, momentum, worker_id));
}

PushRequestBuilder::PushRequestBuilder(
    CompressorOptions options, std::unique_ptr<const Compressor> compressor,
    bool error_feedback, MomentumCorrectionOptions momentum, uint32_t worker_id)
    : options_(std::move(options)),
      compressor_(std::move(compressor)),
      error_feedback_(error_feedback),
      momentum_(momentum),
      worker_id_(worker_id) {}

absl::Status PushRequestBuilder::PrepareFor(const ChunkPlan& plan) {
  // The device kernels keep no velocity: with momentum on the worker, CUDA
  // gradients go through the host.
  if (!plan.any_cuda() || momentum_.enabled()) return absl::OkStatus();
  auto device = DeviceChunkCompressor::Create(options_, error_feedback_);
  if (!device.ok()) return device.status();
  device_compressor_ = *std::move(device);
  return absl::OkStatus();
}

void PushRequestBuilder::BeginStep() {
  if (device_compressor_) device_compressor_->BeginStep();
}

absl::Status PushRequestBuilder::Build(const std::vector<uint64_t>& keys,
                                       uint64_t step, int epoch,
                                       ChunkPlan* plan,
                                       std::vector<v1::PushRequest>* requests) {
  requests->assign(plan->num_shards(), v1::PushRequest());
  for (v1::PushRequest& request : *requests) {
    request.set_worker_id(worker_id_);
    request.set_step(step);
  }
  CompressContext context;
  context.step = step;
  context.epoch = epoch;
  for (const uint64_t key : keys) {
    ChunkSlot& slot = plan->slot(key);
    const ChunkSpec& spec = slot.spec;
    const torch::Tensor& parameter = plan->ParameterOf(spec);
    context.chunk_key = spec.key;
    absl::Status s = CatchTorch("gradwire push", [&] {
      return CompressChunk(parameter.grad(), context, &slot);
    });
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrFormat("chunk %d (%s): %s", spec.key,
                                          plan->NameOf(spec), s.message()));
    }
    v1::ChunkGradient* pushed = (*requests)[spec.shard].add_chunks();
    pushed->set_key(spec.key);
    if (absl::Status e = EncodeChunk(slot.scratch, pushed->mutable_gradient());
        !e.ok()) {
      return e;
    }
  }
  return absl::OkStatus();
}

absl::Status PushRequestBuilder::CompressChunk(const torch::Tensor& gradient,
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
  absl::Span<const float> values = HostChunk(host, offset, spec.numel);
  if (momentum_.enabled()) {
    if (absl::Status s =
            AccumulateVelocity(momentum_, options_.non_finite, values,
                               &slot->velocity, &slot->momentum_input, &values);
        !s.ok()) {
      return s;
    }
  }
  absl::Status compressed =
      error_feedback_ ? compressor_->CompressWithFeedback(
                            values, context, &slot->feedback, &slot->scratch)
                      : compressor_->Compress(values, context, &slot->scratch);
  if (compressed.ok() && momentum_.enabled()) {
    MaskSentVelocity(momentum_, slot->scratch, absl::MakeSpan(slot->velocity));
  }
  return compressed;
}

}  // namespace gradwire
