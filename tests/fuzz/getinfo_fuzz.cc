// libFuzzer target for a GetInfo request as the service takes it: its
// fields counted on the received slices (request_fields.h), refused
// unparsed over the unknown-field limit or when not a message, parsed, and
// answered with Shard::Info().
//
// Input: a setup byte (bit 0: the shard is initialised; bit 1: and has
// trained one step), a slice-size byte (0: one slice, else 1 + byte % 64
// bytes a slice), then the request's bytes, to the end of the input.
// What must hold whatever the input:
//   - the counts stay within their limits + 1, and what the count finds
//     well formed parses (request_path.h);
//   - neither a refused nor an answered request changes
//     Shard::StateDigest();
//   - the answer describes the shard: its id and shard count, whether it is
//     initialised, and versions with min_version <= max_version.
// Any violation aborts through __builtin_trap.
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"
#include "tests/fuzz/request_path.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

void Run(InputReader& input) {
  const uint8_t setup = input.Byte();
  const uint8_t slice_byte = input.Byte();
  const bool initialised = (setup & 1) != 0;
  Shard shard(MakeShardOptions());
  const ShardSetup shard_setup;
  if (initialised) {
    v1::InitResponse init;
    Check(shard.Init(MakeInit(MakeConfig(shard_setup), 0), &init).ok());
  }
  if (initialised && (setup & 2) != 0) {
    for (uint32_t worker = 0; worker < shard_setup.num_workers; ++worker) {
      std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
      for (size_t i = 0; i < kNumChunks; ++i) {
        chunks.emplace_back(kChunkKeys[i],
                            DenseData(GradientValues(kChunkNumels[i], i)));
      }
      v1::PushResponse pushed;
      Check(shard.Push(MakePush(worker, 0, chunks), &pushed).ok());
    }
  }
  const uint64_t before = shard.StateDigest();
  const size_t slice_size = slice_byte == 0 ? 0 : 1 + slice_byte % 64;
  v1::GetInfoRequest request;
  const Taken taken = TakeRequest(ReceivedBuffer(input.Rest(), slice_size),
                                  kMaxChunks, &request);
  if (Verbose()) {
    std::fprintf(stderr, "GetInfo taken as %d\n", static_cast<int>(taken));
  }
  if (taken == Taken::kParsed) {
    const v1::ShardInfo info = shard.Info();
    Check(info.shard_id() == kShardId);
    Check(info.num_shards() == kNumShards);
    Check(info.initialized() == initialised);
    Check(info.min_version() <= info.max_version());
  }
  Check(shard.StateDigest() == before);
}

}  // namespace
}  // namespace gradwire::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gradwire::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradwire::fuzz::InputReader input(data, size);
  gradwire::fuzz::Run(input);
  return 0;
}
