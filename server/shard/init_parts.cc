#include "server/shard/init_parts.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/codec/codec.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace gradwire {
namespace {

// Deterministic serialization, so that equal configs compare equal.
std::string Serialized(const v1::TrainingConfig& config) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  config.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

}  // namespace

absl::Status InitParts::CheckPart(const v1::InitRequest& part) {
  if (part.values_omitted()) {
    return absl::InvalidArgumentError(
        "an Init in parts carries values: values_omitted must be false");
  }
  if (part.values_parts() > kMaxInitParts) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Init in %d parts: at most %d are accepted",
                        part.values_parts(), kMaxInitParts));
  }
  if (part.values_part() >= part.values_parts()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Init part %d of %d: the part index must be below "
                        "the count",
                        part.values_part(), part.values_parts()));
  }
  return absl::OkStatus();
}

absl::Status InitParts::CheckContinues(const v1::InitRequest& part) const {
  if (part.values_part() == 0) return absl::OkStatus();
  if (received_ == 0) {
    return absl::AbortedError(absl::StrFormat(
        "Init part %d of %d from worker %d: the shard holds no earlier part "
        "(it restarted, or another worker started over); send part 0 again",
        part.values_part(), part.values_parts(), part.worker_id()));
  }
  if (part.worker_id() != worker_ || part.values_parts() != parts_ ||
      part.values_part() != received_) {
    return absl::AbortedError(absl::StrFormat(
        "Init part %d of %d from worker %d does not continue the parts the "
        "shard holds (%d of %d from worker %d); send part 0 again",
        part.values_part(), part.values_parts(), part.worker_id(), received_,
        parts_, worker_));
  }
  if (Serialized(part.config()) != config_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Init part %d of %d from worker %d carries another training config "
        "than part 0",
        part.values_part(), part.values_parts(), part.worker_id()));
  }
  return absl::OkStatus();
}

absl::Status InitParts::Add(const v1::InitRequest& part, ChunkMap chunks,
                            uint64_t overhead_bytes, absl::Time now) {
  if (part.values_part() == 0) {
    *this = InitParts();
    worker_ = part.worker_id();
    parts_ = part.values_parts();
    config_ = Serialized(part.config());
  }
  for (const auto& [key, chunk] : chunks) {
    if (chunks_.count(key) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Init part %d declares chunk %d, which an earlier part declared",
          part.values_part(), key));
    }
  }
  for (auto& [key, chunk] : chunks) {
    elements_ += chunk->numel;
    chunks_.emplace(key, std::move(chunk));
  }
  ++received_;
  overhead_bytes_ += overhead_bytes;
  last_part_at_ = now;
  return absl::OkStatus();
}

std::vector<std::string> InitParts::Records(const v1::InitRequest& last,
                                            uint64_t max_bytes) const {
  v1::InitRequest header;
  header.set_worker_id(last.worker_id());
  header.set_shard_id(last.shard_id());
  *header.mutable_config() = last.config();
  std::vector<v1::InitRequest> parts(1, header);
  uint64_t bytes = header.ByteSizeLong();
  for (const auto& [key, held] : chunks_) {
    ChunkState& chunk = *held;
    absl::MutexLock lock(&chunk.mu);
    // Through chunk.state: clang's analysis does not follow a const
    // reference to a guarded field.
    ChunkSnapshot& state = chunk.state;
    CompressedChunk dense;
    dense.encoding = Encoding::kDense;
    dense.numel = state.numel;
    dense.precision = ValuePrecision::kFp32;
    dense.values = state.weights;
    v1::ChunkDeclaration declaration;
    declaration.set_key(key);
    declaration.set_tensor_name(state.tensor_name);
    declaration.set_offset(state.offset);
    // Cannot fail: dense fp32 values of the declared numel.
    EncodeChunk(dense, declaration.mutable_initial()).IgnoreError();
    const uint64_t size = declaration.ByteSizeLong();
    if (parts.back().chunks_size() > 0 && bytes + size > max_bytes) {
      parts.push_back(header);
      bytes = header.ByteSizeLong();
    }
    bytes += size;
    *parts.back().add_chunks() = std::move(declaration);
  }
  std::vector<std::string> records;
  records.reserve(parts.size());
  // A single record is still a part of one: replay takes it through the
  // same path, and values_parts 1 means "whole" there.
  const uint32_t count = static_cast<uint32_t>(parts.size());
  for (uint32_t p = 0; p < count; ++p) {
    if (count > 1) {
      parts[p].set_values_part(p);
      parts[p].set_values_parts(count);
    }
    records.push_back(parts[p].SerializeAsString());
  }
  return records;
}

ChunkMap InitParts::Take() {
  ChunkMap chunks = std::move(chunks_);
  *this = InitParts();
  return chunks;
}

}  // namespace gradwire
