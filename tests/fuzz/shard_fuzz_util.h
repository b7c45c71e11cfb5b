// What the shard fuzz targets (push_fuzz.cc, init_fuzz.cc) and their seed
// generator (make_seeds.cc) share: the layout of a fuzz input, the small
// shard every input runs against, and builders for valid requests.
//
// Input layout of both targets: one setup byte, then records. A record is
// an op byte followed by its operands; a message operand is a 16-bit
// little-endian length and that many bytes of a serialized protobuf. A
// reader that runs out of bytes yields zeros (and empty messages), so every
// byte string is a valid input.
//
// Thread safety: none; each object is used by one thread.
#ifndef GRADWIRE_TESTS_FUZZ_SHARD_FUZZ_UTIL_H_
#define GRADWIRE_TESTS_FUZZ_SHARD_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"

namespace gradwire::fuzz {

// Reports a broken invariant to libFuzzer (a crash it records and
// minimises).
inline void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// Whether GRADWIRE_FUZZ_VERBOSE is set in the environment: the targets then
// print each call and its result to stderr, for reading what a crashing
// input did.
bool Verbose();

// Turns protobuf's own log lines off (a fuzzed string field with invalid
// UTF-8 logs one per parse), so that the fuzzer's output stays readable.
void SilenceProtobufLogs();

// The shard under test: shard 2 of 4, three chunks of a few elements.
inline constexpr uint32_t kShardId = 2;
inline constexpr uint32_t kNumShards = 4;
inline constexpr float kLearningRate = 0.5f;
inline constexpr uint64_t kChunkKeys[] = {7, 19, 20};
inline constexpr uint64_t kChunkNumels[] = {8, 5, 3};
inline constexpr size_t kNumChunks = 3;
// A key no chunk of the shard has.
inline constexpr uint64_t kForeignKey = 99;
// Largest chunk the Init target's shard accepts: a numel claim above it is
// refused before anything is allocated.
inline constexpr uint64_t kMaxChunkNumel = 1024;
// The Init target's shard's budget (ShardOptions::max_chunks and
// max_init_overhead_bytes): a declared chunk costs the shard its state and
// a progress entry per worker, so both stay small.
inline constexpr uint64_t kMaxChunks = 64;
inline constexpr uint64_t kMaxInitOverheadBytes = uint64_t{256} << 10;

// Reads an input front to back; past the end every read yields zero.
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  uint8_t Byte();
  // A 16-bit length, then that many bytes (fewer at the end of the input).
  absl::string_view Message();
  // Every byte not read yet; the input is then empty.
  absl::string_view Rest();

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

// Writes inputs in the layout InputReader reads (for seeds).
class InputWriter {
 public:
  InputWriter& Byte(uint8_t value);
  InputWriter& Message(const google::protobuf::MessageLite& message);
  // Raw bytes in the layout of InputReader::Message (at most 0xffff).
  InputWriter& Bytes(absl::string_view bytes);
  // Raw bytes without a length, for InputReader::Rest.
  InputWriter& Tail(absl::string_view bytes);
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// The push target's setup byte decoded: consistency mode, worker count and
// whether pulls are served as deltas.
struct ShardSetup {
  v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_BSP;
  uint32_t num_workers = 2;
  bool pull_deltas = false;
  // SSP only.
  uint32_t staleness = 2;

  static ShardSetup FromByte(uint8_t byte);
  uint8_t ToByte() const;
};

// Plain SGD at kLearningRate with `setup`'s mode, workers and pull deltas
// (Top-K 50% at fp32).
v1::TrainingConfig MakeConfig(const ShardSetup& setup);

// Deterministic, distinct initial weights of chunk `index`.
std::vector<float> InitialWeights(size_t index);

// Init of every chunk (kChunkKeys, dense initial weights) by `worker`.
v1::InitRequest MakeInit(const v1::TrainingConfig& config, uint32_t worker);

// ShardOptions of shard kShardId of kNumShards that accept any config,
// chunks of at most kMaxChunkNumel elements, at most kMaxChunks of them and
// an Init overhead of at most kMaxInitOverheadBytes.
ShardOptions MakeShardOptions();

// Small values that differ by `seed` and element: multiples of 1/16 in
// [-4, 4).
std::vector<float> GradientValues(uint64_t numel, uint64_t seed);

// Dense fp32 chunk data of `values`.
v1::ChunkData DenseData(absl::Span<const float> values);

// `values` through the registered compressor `name` (at ratio 0.5, no error
// feedback) and the wire encoder; dense data when the compressor refuses.
v1::ChunkData CompressedData(const std::string& name,
                             absl::Span<const float> values, uint64_t key,
                             uint64_t step);

// Names of the compressors the push target builds gradients with.
const std::vector<std::string>& GradientEncodings();

// A push of (key, data) pairs by `worker` for `step`.
v1::PushRequest MakePush(
    uint32_t worker, uint64_t step,
    const std::vector<std::pair<uint64_t, v1::ChunkData>>& chunks);

}  // namespace gradwire::fuzz

#endif  // GRADWIRE_TESTS_FUZZ_SHARD_FUZZ_UTIL_H_
