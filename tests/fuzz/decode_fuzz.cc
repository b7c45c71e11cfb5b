// libFuzzer target for the wire decoder (common/codec/codec.h).
//
// Each input is a serialized gradwire.v1.ChunkData. The target decodes it
// under both non-finite policies and checks that
//   - a rejected message leaves the output chunk untouched;
//   - an accepted one is well formed, decompresses without touching memory
//     out of bounds (ASan), and survives encode -> decode unchanged, with the
//     re-encoded bytes a fixed point of decode -> encode.
// Any violation aborts through __builtin_trap so libFuzzer records a crash.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "gradwire/v1/chunk.pb.h"

namespace gradwire {
namespace {

// Largest numel the target accepts, so that one input cannot allocate more
// than a few MiB.
constexpr uint64_t kMaxFuzzNumel = uint64_t{1} << 20;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

template <typename T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

bool SameFloat(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every field, bitwise.
bool SameChunk(const CompressedChunk& a, const CompressedChunk& b) {
  return a.encoding == b.encoding && a.numel == b.numel &&
         a.precision == b.precision && SameBytes(a.values, b.values) &&
         SameBytes(a.indices, b.indices) && a.seed == b.seed &&
         SameFloat(a.norm, b.norm) && a.bucket_size == b.bucket_size &&
         SameBytes(a.bucket_scales, b.bucket_scales) &&
         a.num_levels == b.num_levels && SameBytes(a.levels, b.levels) &&
         SameBytes(a.negative_bits, b.negative_bits) &&
         SameFloat(a.scale, b.scale) &&
         SameBytes(a.positive_bits, b.positive_bits);
}

CompressedChunk Sentinel() {
  CompressedChunk c;
  c.encoding = Encoding::kSparse;
  c.numel = 9;
  c.values = {1.0f, 2.0f};
  c.indices = {4, 7};
  c.seed = 77;
  return c;
}

std::vector<float> Decompressed(const CompressedChunk& chunk) {
  std::vector<float> dense(chunk.numel);
  DecompressInto(chunk, absl::MakeSpan(dense));
  return dense;
}

void CheckOne(const v1::ChunkData& message, const DecodeOptions& options) {
  const CompressedChunk sentinel = Sentinel();
  CompressedChunk first = sentinel;
  if (!DecodeChunk(message, options, &first).ok()) {
    Check(SameChunk(first, sentinel));
    return;
  }
  Check(CheckWellFormed(first).ok());
  const std::vector<float> dense = Decompressed(first);
  // Accepted values are finite (or zeroed). QSGD is exempt: a finite norm
  // near FLT_MAX times a level may still overflow in DecompressInto.
  if (first.encoding != Encoding::kQsgd) {
    for (float v : dense) Check(std::isfinite(v));
  }

  v1::ChunkData reencoded;
  Check(EncodeChunk(first, &reencoded).ok());
  CompressedChunk second;
  Check(DecodeChunk(reencoded, options, &second).ok());
  Check(SameChunk(first, second));
  Check(SameBytes(dense, Decompressed(second)));

  v1::ChunkData again;
  Check(EncodeChunk(second, &again).ok());
  Check(again.SerializeAsString() == reencoded.SerializeAsString());
}

}  // namespace
}  // namespace gradwire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradwire::v1::ChunkData message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  gradwire::DecodeOptions options;
  // The receiver knows the numel it expects; take the message's own claim
  // (capped) so that both matching and mismatching claims are exercised.
  options.expected_numel =
      std::min<uint64_t>(message.numel(), gradwire::kMaxFuzzNumel);
  options.max_numel = gradwire::kMaxFuzzNumel;
  for (gradwire::NonFinitePolicy policy :
       {gradwire::NonFinitePolicy::kReject, gradwire::NonFinitePolicy::kZero}) {
    options.non_finite = policy;
    gradwire::CheckOne(message, options);
  }
  return 0;
}
