#include "bench/common/zero_init.h"

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"

namespace gradwire::bench {

absl::Status BuildZeroInit(const v1::TrainingConfig& config,
                           const Partition& partition, uint32_t shard,
                           const std::string& tensor_name,
                           v1::InitRequest* init) {
  init->set_worker_id(0);
  init->set_shard_id(shard);
  *init->mutable_config() = config;
  CompressedChunk zeros;
  zeros.encoding = Encoding::kDense;
  for (const ChunkSpec& spec : partition.ChunksOfShard(shard)) {
    v1::ChunkDeclaration* declaration = init->add_chunks();
    declaration->set_key(spec.key);
    declaration->set_tensor_name(tensor_name);
    declaration->set_offset(spec.offset);
    zeros.numel = spec.numel;
    zeros.values.assign(spec.numel, 0.0f);
    if (absl::Status s = EncodeChunk(zeros, declaration->mutable_initial());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
