#include "worker/worker_state.h"

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "gradwire/v1/worker_state.pb.h"
#include "worker/chunk_plan.h"
#include "worker/device_chunks.h"

namespace gradwire {
namespace {

// Floats as little-endian binary32 bytes (the hosts gradwire builds for are
// little-endian, so this is a copy).
std::string FloatBytes(const float* data, size_t count) {
  return std::string(reinterpret_cast<const char*>(data),
                     count * sizeof(float));
}

std::string FloatBytes(const std::vector<float>& values) {
  return FloatBytes(values.data(), values.size());
}

// The floats in `bytes`, which must hold 0 or `numel` of them (0: none
// yet). Returns false for any other size.
bool ReadFloats(const std::string& bytes, uint64_t numel,
                std::vector<float>* out) {
  if (bytes.empty()) {
    out->clear();
    return true;
  }
  if (bytes.size() != numel * sizeof(float)) return false;
  out->resize(numel);
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return true;
}

// The residual of `slot`'s chunk wherever it lives: on the device when its
// parameter is a CUDA tensor the device compressor handles.
std::string ResidualBytes(const ChunkPlan& plan, const ChunkSlot& slot,
                          const DeviceChunkCompressor* device) {
  if (device != nullptr && plan.ParameterOf(slot.spec).is_cuda()) {
    torch::Tensor residual = device->residual(slot.spec.key);
    if (!residual.defined()) return "";
    residual = residual.to(torch::kCPU).contiguous();
    return FloatBytes(residual.data_ptr<float>(),
                      static_cast<size_t>(residual.numel()));
  }
  return FloatBytes(slot.feedback.residual);
}

absl::Status Refuse(const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("worker state: ", what,
                   "; load the state this worker saved in this job"));
}

// Checks that `state` was written by this worker of this job.
absl::Status CheckIdentity(const v1::WorkerState& state,
                           const SyncOptions& options, const ChunkPlan& plan,
                           size_t num_chunks) {
  if (state.format_version() != kWorkerStateFormat) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker state: format %d is not %d (not a gradwire worker state, or "
        "from another version)",
        state.format_version(), kWorkerStateFormat));
  }
  if (state.num_chunks() != num_chunks ||
      static_cast<size_t>(state.chunks_size()) != num_chunks) {
    return Refuse(absl::StrFormat("it has %d chunks where this worker has %d",
                                  state.chunks_size(), num_chunks));
  }
  if (state.model_fingerprint() != plan.partition().plan_fingerprint()) {
    return Refuse(
        "it is from another model (the registered names and shapes differ)");
  }
  if (state.num_workers() != options.num_workers) {
    return Refuse(absl::StrFormat("it is from a job of %d workers, not %d",
                                  state.num_workers(), options.num_workers));
  }
  if (state.worker_id() != options.client.worker_id) {
    return Refuse(absl::StrFormat("it is worker %d's, not worker %d's",
                                  state.worker_id(), options.client.worker_id));
  }
  if (state.local_rank() != static_cast<uint32_t>(options.local.rank) ||
      state.local_size() != static_cast<uint32_t>(options.local.size)) {
    return Refuse(absl::StrFormat("it is local rank %d of %d, not %d of %d",
                                  state.local_rank(), state.local_size(),
                                  options.local.rank, options.local.size));
  }
  if (state.compressor() != options.compressor.name ||
      state.error_feedback() != options.error_feedback) {
    return Refuse(absl::StrFormat(
        "it holds the state of compressor %s (error feedback %s), not %s "
        "(%s)",
        state.compressor(), state.error_feedback() ? "on" : "off",
        options.compressor.name, options.error_feedback ? "on" : "off"));
  }
  return absl::OkStatus();
}

// What one chunk's state becomes, read and checked before anything changes.
struct ChunkArrays {
  std::vector<float> residual;
  std::vector<float> dgc_velocity;
  std::vector<float> momentum_velocity;
  std::vector<float> momentum_input;
};

absl::Status ReadChunk(const v1::ChunkWorkerState& chunk, const ChunkSlot& slot,
                       ChunkArrays* arrays) {
  if (chunk.key() != slot.spec.key) {
    return Refuse(absl::StrFormat("chunk %d where chunk %d was expected",
                                  chunk.key(), slot.spec.key));
  }
  const uint64_t n = slot.spec.numel;
  if (!ReadFloats(chunk.residual(), n, &arrays->residual) ||
      !ReadFloats(chunk.dgc_velocity(), n, &arrays->dgc_velocity) ||
      !ReadFloats(chunk.momentum_velocity(), n, &arrays->momentum_velocity) ||
      !ReadFloats(chunk.momentum_input(), n, &arrays->momentum_input)) {
    return Refuse(absl::StrFormat(
        "chunk %d has arrays of another size than its %d elements", chunk.key(),
        n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SaveWorkerState(const ChunkPlan& plan,
                                            const DeviceChunkCompressor* device,
                                            const SyncOptions& options,
                                            uint64_t next_step) {
  v1::WorkerState state;
  state.set_format_version(kWorkerStateFormat);
  state.set_model_fingerprint(plan.partition().plan_fingerprint());
  state.set_num_workers(options.num_workers);
  state.set_worker_id(options.client.worker_id);
  state.set_local_rank(static_cast<uint32_t>(options.local.rank));
  state.set_local_size(static_cast<uint32_t>(options.local.size));
  state.set_compressor(options.compressor.name);
  state.set_error_feedback(options.error_feedback);
  state.set_next_step(next_step);
  const std::vector<uint64_t> keys = plan.AllOwnedKeys();
  state.set_num_chunks(static_cast<uint32_t>(keys.size()));
  for (uint64_t key : keys) {
    const ChunkSlot& slot = plan.slots()[key];
    v1::ChunkWorkerState* chunk = state.add_chunks();
    chunk->set_key(key);
    chunk->set_residual(ResidualBytes(plan, slot, device));
    chunk->set_dgc_velocity(FloatBytes(slot.feedback.velocity));
    chunk->set_momentum_velocity(FloatBytes(slot.velocity));
    chunk->set_momentum_input(FloatBytes(slot.momentum_input));
  }
  if (state.ByteSizeLong() >
      static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InternalError(
        "worker state: over 2 GiB, more than one protobuf message holds");
  }
  return state.SerializeAsString();
}

absl::Status LoadWorkerState(const std::string& bytes,
                             const SyncOptions& options, uint64_t next_step,
                             ChunkPlan* plan, DeviceChunkCompressor* device) {
  v1::WorkerState state;
  if (!state.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "worker state: the bytes are not a gradwire WorkerState");
  }
  const std::vector<uint64_t> keys = plan->AllOwnedKeys();
  if (absl::Status s = CheckIdentity(state, options, *plan, keys.size());
      !s.ok()) {
    return s;
  }
  if (state.next_step() != next_step) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker state: it was saved before step %d, but the shards have this "
        "worker at step %d; restore the shards from the checkpoint of the "
        "same step (server --checkpoint-dir), or load the worker state saved "
        "at step %d",
        state.next_step(), next_step, next_step));
  }
  std::vector<ChunkArrays> arrays(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (absl::Status s = ReadChunk(state.chunks(static_cast<int>(i)),
                                   plan->slot(keys[i]), &arrays[i]);
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    ChunkSlot& slot = plan->slot(keys[i]);
    const torch::Tensor& parameter = plan->ParameterOf(slot.spec);
    if (device != nullptr && parameter.is_cuda()) {
      std::vector<float>& r = arrays[i].residual;
      r.resize(slot.spec.numel, 0.0f);
      device->set_residual(
          keys[i],
          torch::from_blob(r.data(), {int64_t(r.size())}, torch::kFloat32),
          parameter.device());
    } else {
      slot.feedback.residual = std::move(arrays[i].residual);
      slot.feedback.spare.clear();
    }
    slot.feedback.velocity = std::move(arrays[i].dgc_velocity);
    slot.velocity = std::move(arrays[i].momentum_velocity);
    slot.momentum_input = std::move(arrays[i].momentum_input);
  }
  return absl::OkStatus();
}

}  // namespace gradwire
