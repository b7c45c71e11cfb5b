#include "tests/fuzz/request_seeds.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gradwire/v1/parameter_server.pb.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

// Over kMaxUnknownRequestFields (1024): each is field 15, varint 0.
constexpr int kTooManyUnknownFields = 1100;

// `count` unknown varint fields of number 15 (absent from both requests).
std::string UnknownFields(int count) {
  std::string bytes;
  for (int i = 0; i < count; ++i) bytes += std::string("\x78\x00", 2);
  return bytes;
}

std::string Prefix(std::initializer_list<uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// Setup bytes of the pull target.
uint8_t Mode(v1::ConsistencyMode mode, bool deltas) {
  ShardSetup setup;
  setup.mode = mode;
  setup.pull_deltas = deltas;
  return setup.ToByte();
}

// A pull by worker 0 of `keys`, each from version 0.
v1::PullRequest PullOf(const std::vector<uint64_t>& keys, bool allow_delta,
                       uint64_t min_step = 0) {
  v1::PullRequest request;
  request.set_worker_id(0);
  request.set_allow_delta(allow_delta);
  for (const uint64_t key : keys) {
    v1::ChunkPull* pull = request.add_chunks();
    pull->set_key(key);
    pull->set_min_step(min_step);
  }
  return request;
}

const std::vector<uint64_t> kAllKeys(std::begin(kChunkKeys),
                                     std::end(kChunkKeys));

}  // namespace

std::vector<std::pair<std::string, std::string>> GetInfoSeeds() {
  const std::string few = UnknownFields(3) +
                          "\x4a\x03"
                          "abc";
  return {
      {"empty_uninitialised", Prefix({0, 0})},
      {"empty_initialised", Prefix({1, 0})},
      {"empty_trained", Prefix({3, 0})},
      {"few_unknown_fields", Prefix({1, 0}) + few},
      {"few_unknown_fields_sliced", Prefix({1, 1}) + few},
      {"many_unknown_fields",
       Prefix({1, 0}) + UnknownFields(kTooManyUnknownFields)},
      {"unknown_group", Prefix({1, 0}) + "\x13\x08\x01\x14"},
      {"not_a_message", Prefix({1, 0}) + "\x0a\x05"
                                         "ab"},
  };
}

std::vector<std::pair<std::string, std::string>> PullSeeds() {
  const auto input = [](uint8_t setup, uint8_t steps, uint8_t limit,
                        uint8_t slices, const std::string& request) {
    return Prefix({setup, steps, limit, slices}) + request;
  };
  const uint8_t bsp = Mode(v1::CONSISTENCY_MODE_BSP, false);
  const uint8_t bsp_deltas = Mode(v1::CONSISTENCY_MODE_BSP, true);
  const uint8_t asp_deltas = Mode(v1::CONSISTENCY_MODE_ASP, true);
  const uint8_t ssp_deltas = Mode(v1::CONSISTENCY_MODE_SSP, true);
  // 16 * 32 = 512 bytes: room for any answer of the three chunks.
  constexpr uint8_t kRoomy = 31;
  const std::string dense = PullOf(kAllKeys, false).SerializeAsString();
  const std::string delta = PullOf(kAllKeys, true).SerializeAsString();
  // Chunks field (2) holding chunk 0 and four fields ChunkPull lacks.
  v1::ChunkPull first;
  first.set_key(kChunkKeys[0]);
  const std::string chunk = first.SerializeAsString() + UnknownFields(4);
  const std::string nested =
      std::string("\x12") + static_cast<char>(chunk.size()) + chunk;
  v1::PullRequest partial = PullOf(kAllKeys, false);
  partial.set_allow_partial(true);
  v1::PullRequest none;
  none.set_allow_partial(true);
  const std::string partial_none = none.SerializeAsString();
  v1::PullRequest too_many;
  for (uint64_t i = 0; i <= kMaxChunks; ++i) {
    too_many.add_chunks()->set_key(kChunkKeys[i % kNumChunks]);
  }
  std::vector<std::pair<std::string, std::string>> seeds = {
      {"dense_all_bsp", input(bsp, 1, kRoomy, 0, dense)},
      {"dense_all_untrained", input(bsp, 0, kRoomy, 0, dense)},
      {"delta_all_bsp", input(bsp_deltas, 2, kRoomy, 0, delta)},
      {"delta_all_asp", input(asp_deltas, 3, kRoomy, 0, delta)},
      {"delta_all_ssp", input(ssp_deltas, 2, kRoomy, 0, delta)},
      {"dense_all_sliced", input(bsp, 1, kRoomy, 1, dense)},
      {"unknown_chunk_key",
       input(bsp, 1, kRoomy, 0,
             PullOf({kForeignKey}, false).SerializeAsString())},
      {"chunk_twice",
       input(
           bsp, 1, kRoomy, 0,
           PullOf({kChunkKeys[1], kChunkKeys[1]}, false).SerializeAsString())},
      {"too_many_entries",
       input(bsp, 0, kRoomy, 0, too_many.SerializeAsString())},
      {"many_unknown_fields",
       input(bsp, 1, kRoomy, 0, dense + UnknownFields(kTooManyUnknownFields))},
      {"few_unknown_fields",
       input(bsp, 1, kRoomy, 3, dense + UnknownFields(5))},
      {"unknown_fields_in_a_chunk", input(bsp, 1, kRoomy, 0, nested)},
      {"huge_min_step",
       input(bsp, 1, kRoomy, 0,
             PullOf(kAllKeys, false, std::numeric_limits<uint64_t>::max())
                 .SerializeAsString())},
      {"not_a_message", input(bsp, 1, kRoomy, 0, "\x12\x09\x08")},
      {"empty_partial", input(bsp, 1, kRoomy, 0, partial_none)},
  };
  // Limits from 208 to 288 bytes around the estimate of a pull of every
  // chunk (16 values at fp32 and 64 bytes a chunk: 256): refused before
  // building, and answered at and above it.
  for (uint8_t limit = 12; limit < 18; ++limit) {
    seeds.emplace_back("dense_limit_" + std::to_string(16 * (1 + limit)),
                       input(bsp, 1, limit, 0, dense));
    seeds.emplace_back("delta_limit_" + std::to_string(16 * (1 + limit)),
                       input(asp_deltas, 2, limit, 0, delta));
    seeds.emplace_back("partial_limit_" + std::to_string(16 * (1 + limit)),
                       input(bsp, 1, limit, 0, partial.SerializeAsString()));
  }
  return seeds;
}

}  // namespace gradwire::fuzz
