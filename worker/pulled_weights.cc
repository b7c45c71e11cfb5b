#include "worker/pulled_weights.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "worker/device_chunks.h"
#include "worker/host_chunk.h"

namespace gradwire {
namespace {

// Writes `decoded`, pulled for chunk `spec`, into `parameter`.
void WriteChunk(const CompressedChunk& decoded, bool is_delta,
                const torch::Tensor& parameter, const ChunkSpec& spec) {
  if (parameter.device().is_cuda()) {
    WriteChunkToDevice(decoded, is_delta, parameter, spec.offset);
    return;
  }
  auto target = HostChunk(parameter, spec.offset, spec.numel);
  if (is_delta) {
    AccumulateInto(decoded, 1.0f, target);
  } else {
    DecompressInto(decoded, target);
  }
}

// INTERNAL when `weights` is a delta that does not apply to what `slot`
// holds: from another version, or from another history (a shard that
// answers deltas against an epoch the worker did not send).
absl::Status CheckDelta(const v1::ChunkWeights& weights, uint64_t epoch,
                        const ChunkSlot& slot) {
  if (!weights.is_delta()) {
    if (weights.chain_size() != 0) {
      return absl::InternalError(absl::StrFormat(
          "chunk %d: dense weights with a chain of deltas", slot.spec.key));
    }
    return absl::OkStatus();
  }
  // A delta (or a chain of them) moves any number of versions forward.
  if (weights.version() < slot.version) {
    return absl::InternalError(
        absl::StrFormat("chunk %d: delta to version %d for a worker at %d",
                        slot.spec.key, weights.version(), slot.version));
  }
  if (epoch != slot.epoch) {
    return absl::InternalError(absl::StrFormat(
        "chunk %d: delta of history epoch %#x for a worker holding epoch %#x",
        slot.spec.key, epoch, slot.epoch));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<v1::PullRequest> BuildPullRequests(const ChunkPlan& plan,
                                               absl::Span<const uint64_t> keys,
                                               uint32_t worker_id,
                                               bool allow_delta,
                                               uint64_t min_step) {
  std::vector<v1::PullRequest> requests(plan.num_shards());
  for (v1::PullRequest& request : requests) {
    request.set_worker_id(worker_id);
    request.set_allow_delta(allow_delta);
    request.set_allow_delta_chain(allow_delta);
  }
  for (const uint64_t key : keys) {
    const ChunkSlot& slot = plan.slots()[key];
    v1::ChunkPull* pull = requests[slot.spec.shard].add_chunks();
    pull->set_key(slot.spec.key);
    pull->set_have_version(slot.version);
    pull->set_have_epoch(slot.epoch);
    pull->set_min_step(min_step);
  }
  return requests;
}

absl::StatusOr<uint64_t> ApplyPulledWeights(
    const std::vector<v1::PullResponse>& responses, ChunkPlan* plan,
    CpuAccount* account) {
  std::vector<CompressedChunk> decoded;
  uint64_t min_clock = std::numeric_limits<uint64_t>::max();
  for (const v1::PullResponse& response : responses) {
    for (const v1::ChunkWeights& weights : response.chunks()) {
      min_clock = std::min(min_clock, weights.clock());
      if (weights.key() >= plan->slots().size()) {
        return absl::InternalError(
            absl::StrFormat("shard answered unknown chunk %d", weights.key()));
      }
      ChunkSlot& slot = plan->slot(weights.key());
      const ChunkSpec& spec = slot.spec;
      if (absl::Status s = CheckDelta(weights, response.history_epoch(), slot);
          !s.ok()) {
        return s;
      }
      DecodeOptions decode;
      decode.expected_numel = spec.numel;
      // Every part decodes before any is written: a bad one leaves the
      // chunk as it was.
      decoded.resize(1 + weights.chain_size());
      CpuAccount::Scope decoding(account, CpuActivity::kDecode);
      for (int i = 0; i < static_cast<int>(decoded.size()); ++i) {
        const v1::ChunkData& data =
            i == 0 ? weights.data() : weights.chain(i - 1);
        if (absl::Status s = DecodeChunk(data, decode, &decoded[i]); !s.ok()) {
          return absl::Status(s.code(), absl::StrFormat("pulled chunk %d: %s",
                                                        spec.key, s.message()));
        }
      }
      CpuAccount::Scope writing(account, CpuActivity::kCopy);
      for (const CompressedChunk& part : decoded) {
        WriteChunk(part, weights.is_delta(), plan->WeightsOf(spec), spec);
      }
      slot.version = weights.version();
      slot.epoch = response.history_epoch();
    }
  }
  return min_clock;
}

}  // namespace gradwire
