// libFuzzer target for a Pull request as the service takes it: its fields
// counted on the received slices (request_fields.h), refused unparsed over
// the chunk-entry or unknown-field limits or when not a message, parsed,
// and answered by Shard::Pull on an initialised shard.
//
// Input: a setup byte (ShardSetup::FromByte: mode, workers, dense or delta
// pulls), a byte whose value % 4 is the steps every worker has pushed, a
// byte that sets ShardOptions::max_message_bytes to 16 * (1 + byte % 32),
// a slice-size byte (0: one slice, else 1 + byte % 64 bytes a slice), then
// the request's bytes, to the end of the input. Pulls get a deadline in
// the past, so a pull for a step not reached answers DEADLINE_EXCEEDED at
// once instead of waiting.
// What must hold whatever the input:
//   - the counts stay within their limits + 1, and what the count finds
//     well formed parses (request_path.h);
//   - a refused request (by the count or by the shard) leaves
//     Shard::StateDigest() unchanged and answers nothing;
//   - an answered one changes nothing but the shadow (it may publish a
//     delta), answers each chunk it names (with allow_partial, a
//     non-empty prefix of them, marked partial) with the shard's history
//     epoch, and is at most max_message_bytes serialized.
// Any violation aborts through __builtin_trap.
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"
#include "tests/fuzz/request_path.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

// Every worker pushes dense gradients of every chunk for steps [0, steps).
void Train(Shard& shard, const ShardSetup& setup, uint64_t steps) {
  for (uint64_t step = 0; step < steps; ++step) {
    for (uint32_t worker = 0; worker < setup.num_workers; ++worker) {
      std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
      for (size_t i = 0; i < kNumChunks; ++i) {
        chunks.emplace_back(kChunkKeys[i], DenseData(GradientValues(
                                               kChunkNumels[i], step + i)));
      }
      v1::PushResponse pushed;
      Check(shard.Push(MakePush(worker, step, chunks), &pushed).ok());
    }
  }
}

void Run(InputReader& input) {
  const ShardSetup setup = ShardSetup::FromByte(input.Byte());
  const uint64_t steps = input.Byte() % 4;
  ShardOptions options = MakeShardOptions();
  options.max_message_bytes = 16 * (1 + uint64_t{input.Byte()} % 32);
  const uint8_t slice_byte = input.Byte();
  Shard shard(options);
  v1::InitResponse init;
  Check(shard.Init(MakeInit(MakeConfig(setup), 0), &init).ok());
  Train(shard, setup, steps);

  const uint64_t before = shard.StateDigest();
  const uint64_t before_training = shard.StateDigest(false);
  const size_t slice_size = slice_byte == 0 ? 0 : 1 + slice_byte % 64;
  v1::PullRequest request;
  const Taken taken = TakeRequest(ReceivedBuffer(input.Rest(), slice_size),
                                  kMaxChunks, &request);
  if (taken != Taken::kParsed) {
    Check(shard.StateDigest() == before);
    return;
  }
  v1::PullResponse response;
  const absl::Status status =
      shard.Pull(request, absl::InfinitePast(), &response);
  if (Verbose()) {
    std::fprintf(stderr,
                 "pull of %d chunks (limit %llu bytes): %s, %zu bytes\n",
                 request.chunks_size(),
                 static_cast<unsigned long long>(options.max_message_bytes),
                 status.ToString().c_str(), response.ByteSizeLong());
  }
  if (!status.ok()) {
    Check(shard.StateDigest() == before);
    Check(response.chunks_size() == 0);
    return;
  }
  Check(shard.StateDigest(false) == before_training);
  // A partial answer holds a non-empty prefix of what was asked.
  if (response.partial()) {
    Check(request.allow_partial());
    Check(response.chunks_size() > 0);
    Check(response.chunks_size() < request.chunks_size());
    for (int i = 0; i < response.chunks_size(); ++i) {
      Check(response.chunks(i).key() == request.chunks(i).key());
    }
  } else {
    Check(response.chunks_size() == request.chunks_size());
  }
  Check(response.history_epoch() == shard.history_epoch());
  Check(response.ByteSizeLong() <= options.max_message_bytes);
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
