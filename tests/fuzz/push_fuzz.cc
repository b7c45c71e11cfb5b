// libFuzzer target for Shard::Push and Shard::Pull, end to end: validation,
// the step rules, aggregation, the optimizer and pull deltas.
//
// Input (shard_fuzz_util.h): a setup byte picks the consistency mode (BSP,
// ASP, SSP with staleness 2), two or three workers, and dense or delta
// pulls of a shard with three small chunks. Then records, by op byte % 3:
//   0  raw push:  a length-prefixed serialized v1::PushRequest, also read
//                 in place (push_wire.h) from pieces of 1 + length % 32
//                 bytes, which must accept exactly what protobuf accepts
//                 and give the same fields (its bytes are also parsed and
//                 sent as a v1::PullRequest);
//   1  made push: worker, step, chunk mask, encoding and value-seed bytes,
//                 built into a valid push of compressed gradients;
//   2  pull:      worker, chunk, have_version, min_step and flag bytes
//                 (bit 0 allow_delta, bits 1-3 the dense value type, bit
//                 4 a history epoch other than the shard's), with a
//                 deadline in the past so that it never blocks.
// After every call the target checks what must hold whatever the input:
//   - a refused push leaves Shard::StateDigest() unchanged and no acks;
//   - an accepted push acknowledges each chunk in request order, changes
//     the digest unless every chunk was a duplicate, and sent again is a
//     duplicate of every chunk that changes nothing;
//   - versions and clocks never decrease, clock <= version, and in BSP
//     version == clock;
//   - pulls change nothing and answer data that decodes, carry the shard's
//     history epoch, and are deltas only for a pull of that epoch;
//   - weights stay finite and within the bound that SGD and the accepted
//     (finite, validated) gradients allow: |w| <= |w0| + lr * sum max|g|.
// Any violation aborts through __builtin_trap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/codec/codec.h"
#include "common/codec/push_wire.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/shard/shard.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

// Above this weight bound float overflow is possible, and the finiteness
// check would no longer be an invariant.
constexpr double kLargestCheckedBound = 1e37;

// What the target knows of one chunk, from acks, pulls and the pushes it
// saw accepted.
struct ChunkModel {
  // The chunk's version and clock, as the last ack or pull said.
  uint64_t version = 0;
  uint64_t clock = 0;
  // The version of the last pulled weights.
  uint64_t pulled_version = 0;
  // Upper bound on every |weight|.
  double weight_bound = 0;
};

class PushHarness {
 public:
  explicit PushHarness(const ShardSetup& setup)
      : setup_(setup), shard_(std::make_unique<Shard>(MakeShardOptions())) {
    v1::InitResponse response;
    Check(shard_->Init(MakeInit(MakeConfig(setup), 0), &response).ok());
    for (size_t i = 0; i < kNumChunks; ++i) {
      for (float w : InitialWeights(i)) {
        models_[i].weight_bound =
            std::max(models_[i].weight_bound, double{std::fabs(w)});
      }
    }
  }

  void Run(InputReader& input) {
    while (!input.empty()) {
      switch (input.Byte() % 3) {
        case 0: {
          v1::PushRequest request;
          const absl::string_view bytes = input.Message();
          const size_t piece_size = 1 + bytes.size() % 32;
          const bool parsed = request.ParseFromArray(
              bytes.data(), static_cast<int>(bytes.size()));
          WireBytes pieces;
          for (size_t at = 0; at < bytes.size(); at += piece_size) {
            pieces.Append(bytes.substr(at, piece_size));
          }
          PushView view;
          const absl::Status in_place = ParsePushRequest(
              pieces, std::numeric_limits<uint64_t>::max(), &view);
          Check(in_place.ok() == parsed);
          if (parsed) {
            Check(view == ViewOf(request));
            CheckedPush(request);
          }
          // The same bytes as a Pull: repeated keys, many entries, any
          // field values.
          v1::PullRequest pull;
          if (pull.ParseFromArray(bytes.data(),
                                  static_cast<int>(bytes.size()))) {
            CheckedRawPull(pull);
          }
          break;
        }
        case 1:
          CheckedPush(MadePush(input));
          break;
        default:
          CheckedPull(input);
          break;
      }
      CheckWeights();
    }
  }

 private:
  // A valid encoding of small gradients for the chunks in the mask byte
  // (none: the foreign key).
  v1::PushRequest MadePush(InputReader& input) {
    const uint32_t worker = input.Byte() % (setup_.num_workers + 1);
    const uint64_t step = input.Byte();
    const uint8_t mask = input.Byte();
    const std::string& encoding =
        GradientEncodings()[input.Byte() % GradientEncodings().size()];
    const uint8_t seed = input.Byte();
    std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
    for (size_t i = 0; i < kNumChunks; ++i) {
      if (!((mask >> i) & 1)) continue;
      chunks.emplace_back(
          kChunkKeys[i],
          CompressedData(encoding, GradientValues(kChunkNumels[i], seed),
                         kChunkKeys[i], step));
    }
    if (chunks.empty()) {
      chunks.emplace_back(kForeignKey, DenseData(GradientValues(4, seed)));
    }
    return MakePush(worker, step, chunks);
  }

  static int ChunkIndex(uint64_t key) {
    for (size_t i = 0; i < kNumChunks; ++i) {
      if (kChunkKeys[i] == key) return static_cast<int>(i);
    }
    return -1;
  }

  void CheckedPush(const v1::PushRequest& request) {
    const uint64_t before = shard_->StateDigest();
    v1::PushResponse response;
    const absl::Status status = shard_->Push(request, &response);
    if (Verbose()) {
      std::fprintf(stderr, "push worker %u step %llu chunks %d: %s",
                   request.worker_id(),
                   static_cast<unsigned long long>(request.step()),
                   request.chunks_size(), status.ToString().c_str());
      for (const v1::ChunkAck& ack : response.acks()) {
        std::fprintf(stderr, " [key %llu v%llu c%llu%s]",
                     static_cast<unsigned long long>(ack.key()),
                     static_cast<unsigned long long>(ack.version()),
                     static_cast<unsigned long long>(ack.clock()),
                     ack.duplicate() ? " dup" : "");
      }
      std::fprintf(stderr, "\n");
    }
    if (!status.ok()) {
      Check(shard_->StateDigest() == before);
      Check(response.acks_size() == 0);
      Check(absl::IsInvalidArgument(status) ||
            absl::IsFailedPrecondition(status) || absl::IsOutOfRange(status));
      Check(!status.message().empty());
      return;
    }
    Check(response.acks_size() == request.chunks_size());
    bool all_duplicates = true;
    for (int i = 0; i < request.chunks_size(); ++i) {
      const v1::ChunkAck& ack = response.acks(i);
      Check(ack.key() == request.chunks(i).key());
      const int index = ChunkIndex(ack.key());
      Check(index >= 0);
      ObserveVersion(index, ack.version(), ack.clock());
      if (ack.duplicate()) continue;
      all_duplicates = false;
      AddToBound(index, request.chunks(i).gradient());
    }
    const uint64_t after = shard_->StateDigest();
    Check(all_duplicates == (after == before));
    // The same request again (a retry) is a duplicate of every chunk.
    v1::PushResponse retry;
    Check(shard_->Push(request, &retry).ok());
    Check(shard_->StateDigest() == after);
    Check(retry.acks_size() == response.acks_size());
    for (int i = 0; i < retry.acks_size(); ++i) {
      Check(retry.acks(i).duplicate());
      Check(retry.acks(i).version() == response.acks(i).version());
    }
  }

  // An accepted gradient moves each weight by at most lr * max|g| (SGD; in
  // BSP the step's mean is no larger than its largest push).
  void AddToBound(int index, const v1::ChunkData& data) {
    DecodeOptions options;
    options.expected_numel = kChunkNumels[index];
    CompressedChunk gradient;
    Check(DecodeChunk(data, options, &gradient).ok());
    std::vector<float> dense(kChunkNumels[index]);
    DecompressInto(gradient, absl::MakeSpan(dense));
    double largest = 0;
    for (float g : dense) largest = std::max(largest, double{std::fabs(g)});
    models_[index].weight_bound += double{kLearningRate} * largest;
  }

  void ObserveVersion(int index, uint64_t version, uint64_t clock) {
    ChunkModel& model = models_[index];
    Check(version >= model.version);
    Check(clock >= model.clock);
    Check(clock <= version);
    if (setup_.mode == v1::CONSISTENCY_MODE_BSP) Check(version == clock);
    model.version = version;
    model.clock = clock;
  }

  // A pull answers the chunk's clock and the version of the weights it
  // sends: with pull deltas the shadow's published version, which may lag
  // the chunk's (ASP/SSP between publications; any mode when a difference
  // overflows and cannot be published; published_deltas.h) but never
  // moves back.
  void ObservePulled(int index, uint64_t version, uint64_t clock) {
    ChunkModel& model = models_[index];
    Check(version <= model.version);
    Check(version >= model.pulled_version);
    Check(clock >= model.clock);
    Check(clock <= model.version);
    model.pulled_version = version;
    model.clock = clock;
  }

  // A refused PullRequest changes nothing and answers nothing; an answered
  // one changes nothing but the shadow (it may publish a pull delta).
  void CheckedRawPull(const v1::PullRequest& request) {
    const uint64_t before = shard_->StateDigest();
    const uint64_t before_training = shard_->StateDigest(false);
    v1::PullResponse response;
    const absl::Status status =
        shard_->Pull(request, absl::InfinitePast(), &response);
    if (Verbose()) {
      std::fprintf(stderr, "raw pull of %d chunks: %s\n", request.chunks_size(),
                   status.ToString().c_str());
    }
    Check(status.ok() ? shard_->StateDigest(false) == before_training
                      : shard_->StateDigest() == before);
    if (!status.ok()) Check(response.chunks_size() == 0);
    if (status.ok()) {
      Check(response.chunks_size() == request.chunks_size());
      Check(response.history_epoch() == shard_->history_epoch());
    }
  }

  void CheckedPull(InputReader& input) {
    v1::PullRequest request;
    request.set_worker_id(input.Byte() % (setup_.num_workers + 1));
    const size_t index = input.Byte() % (kNumChunks + 1);
    v1::ChunkPull* pull = request.add_chunks();
    pull->set_key(index < kNumChunks ? kChunkKeys[index] : kForeignKey);
    pull->set_have_version(input.Byte());
    pull->set_min_step(input.Byte());
    const uint8_t flags = input.Byte();
    request.set_allow_delta(flags & 1);
    const int value_type = (flags >> 1) & 7;
    request.set_dense_value_type(
        static_cast<v1::ValueType>(value_type <= 3 ? value_type : 7));
    // Clear (older seeds): the shard's own epoch, so deltas stay reachable.
    const bool other_history = (flags >> 4) & 1;
    pull->set_have_epoch(other_history ? shard_->history_epoch() + 1
                                       : shard_->history_epoch());

    const uint64_t before = shard_->StateDigest();
    const uint64_t before_training = shard_->StateDigest(false);
    v1::PullResponse response;
    const absl::Status status =
        shard_->Pull(request, absl::InfinitePast(), &response);
    if (Verbose()) {
      std::fprintf(stderr, "pull worker %u key %llu min_step %llu: %s\n",
                   request.worker_id(),
                   static_cast<unsigned long long>(pull->key()),
                   static_cast<unsigned long long>(pull->min_step()),
                   status.ToString().c_str());
    }
    Check(status.ok() ? shard_->StateDigest(false) == before_training
                      : shard_->StateDigest() == before);
    const bool answerable = request.worker_id() < setup_.num_workers &&
                            index < kNumChunks && value_type <= 3;
    if (!status.ok()) {
      Check(response.chunks_size() == 0);
      // Only a wait that would have to block may fail a sound request.
      Check(!answerable || (absl::IsDeadlineExceeded(status) &&
                            models_[index].clock < pull->min_step()));
      return;
    }
    Check(answerable);
    Check(response.chunks_size() == 1);
    const v1::ChunkWeights& weights = response.chunks(0);
    Check(weights.key() == kChunkKeys[index]);
    Check(weights.clock() >= pull->min_step());
    Check(response.history_epoch() == shard_->history_epoch());
    Check(!weights.is_delta() || !other_history);
    ObservePulled(index, weights.version(), weights.clock());
    DecodeOptions options;
    options.expected_numel = kChunkNumels[index];
    options.non_finite = NonFinitePolicy::kZero;
    CompressedChunk decoded;
    Check(DecodeChunk(weights.data(), options, &decoded).ok());
  }

  // Every chunk's weights, pulled dense at fp32, against the model.
  void CheckWeights() {
    for (size_t index = 0; index < kNumChunks; ++index) {
      v1::PullRequest request;
      request.add_chunks()->set_key(kChunkKeys[index]);
      v1::PullResponse response;
      Check(shard_->Pull(request, absl::InfinitePast(), &response).ok());
      Check(response.chunks_size() == 1);
      const v1::ChunkWeights& pulled = response.chunks(0);
      ObservePulled(index, pulled.version(), pulled.clock());
      const double bound = models_[index].weight_bound;
      // The decoder refuses non-finite values (NonFinitePolicy::kReject).
      DecodeOptions options;
      options.expected_numel = kChunkNumels[index];
      CompressedChunk weights;
      const bool finite = DecodeChunk(pulled.data(), options, &weights).ok();
      if (Verbose()) {
        std::fprintf(stderr, "  chunk %llu v%llu c%llu: weights %s, bound %g\n",
                     static_cast<unsigned long long>(kChunkKeys[index]),
                     static_cast<unsigned long long>(pulled.version()),
                     static_cast<unsigned long long>(pulled.clock()),
                     finite ? "finite" : "NOT finite", bound);
      }
      if (bound > kLargestCheckedBound) continue;
      Check(finite);
      // With deltas a dense pull answers the shadow: each of its elements
      // is an earlier weight (to rounding), so the same bound holds.
      const double limit = bound * 1.001 + 1e-6;
      for (float w : weights.values) Check(std::fabs(w) <= limit);
    }
  }

  const ShardSetup setup_;
  std::unique_ptr<Shard> shard_;
  ChunkModel models_[kNumChunks];
};

}  // namespace
}  // namespace gradwire::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gradwire::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradwire::fuzz::InputReader input(data, size);
  gradwire::fuzz::PushHarness harness(
      gradwire::fuzz::ShardSetup::FromByte(input.Byte()));
  harness.Run(input);
  return 0;
}
