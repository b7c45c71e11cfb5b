// Writes the seed corpora of the shard fuzz targets:
//   gradwire-fuzz-seeds DIR   writes DIR/{push,init,restore,getinfo,pull}/
//                             <name>
// Each seed is a small input in the layout of shard_fuzz_util.h that leads
// the target to one meaningful case: valid pushes of every encoding, BSP
// steps completed, duplicates, steps from the future and the far past,
// indices out of range, NaN, valid, conflicting and invalid Inits; for the
// restore target, a valid checkpoint and log and each kind of unreadable
// state (durable_state.h); the GetInfo and Pull seeds of request_seeds.h.
// The committed corpus (tests/fuzz/corpus/{push,init,restore,getinfo,pull})
// is this program's output.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "server/durability/checkpoint_format.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/shard.h"
#include "server/shard/shard_journal.h"
#include "tests/fuzz/request_seeds.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

constexpr uint64_t kKeyA = kChunkKeys[0];
constexpr uint64_t kNumelA = kChunkNumels[0];

enum Op : uint8_t { kRawOp = 0, kMadeOp = 1, kPullOp = 2 };

struct Seed {
  std::string name;
  std::string bytes;
};

// Records of the push target.
class PushSeed {
 public:
  explicit PushSeed(ShardSetup setup) { writer_.Byte(setup.ToByte()); }
  PushSeed& Raw(const v1::PushRequest& request) {
    writer_.Byte(kRawOp).Message(request);
    return *this;
  }
  PushSeed& Made(uint8_t worker, uint8_t step, uint8_t chunk_mask,
                 uint8_t encoding, uint8_t seed) {
    for (uint8_t b :
         {uint8_t{kMadeOp}, worker, step, chunk_mask, encoding, seed}) {
      writer_.Byte(b);
    }
    return *this;
  }
  PushSeed& Pull(uint8_t worker, uint8_t chunk, uint8_t have_version,
                 uint8_t min_step, uint8_t flags) {
    for (uint8_t b :
         {uint8_t{kPullOp}, worker, chunk, have_version, min_step, flags}) {
      writer_.Byte(b);
    }
    return *this;
  }
  // Every worker pushes steps [0, steps) of every chunk as `encoding`.
  PushSeed& Steps(uint32_t workers, uint8_t steps, uint8_t encoding) {
    for (uint8_t step = 0; step < steps; ++step) {
      for (uint8_t worker = 0; worker < workers; ++worker) {
        Made(worker, step, 0x7, encoding, step + worker);
      }
    }
    return *this;
  }
  std::string bytes() const { return writer_.bytes(); }

 private:
  InputWriter writer_;
};

ShardSetup Setup(v1::ConsistencyMode mode, uint32_t workers = 2,
                 bool deltas = false) {
  ShardSetup setup;
  setup.mode = mode;
  setup.num_workers = workers;
  setup.pull_deltas = deltas;
  return setup;
}

v1::PushRequest DensePush(uint32_t worker, uint64_t step, uint64_t key,
                          std::vector<float> values) {
  return MakePush(worker, step, {{key, DenseData(values)}});
}

v1::PushRequest EncodedPush(uint32_t worker, uint64_t step,
                            const std::string& encoding) {
  std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
  for (size_t i = 0; i < kNumChunks; ++i) {
    chunks.emplace_back(
        kChunkKeys[i],
        CompressedData(encoding, GradientValues(kChunkNumels[i], step),
                       kChunkKeys[i], step));
  }
  return MakePush(worker, step, chunks);
}

// A sparse fp32 chunk of chunk A with raw index bytes.
v1::PushRequest RawSparsePush(uint64_t nnz, const std::string& indices,
                              size_t num_values) {
  v1::ChunkData data;
  data.set_numel(kNumelA);
  v1::SparseValues* sparse = data.mutable_sparse();
  sparse->set_nnz(nnz);
  sparse->set_indices(indices);
  sparse->set_value_type(v1::VALUE_TYPE_FP32);
  const std::vector<float> values(num_values, 0.5f);
  sparse->set_values(std::string(reinterpret_cast<const char*>(values.data()),
                                 values.size() * sizeof(float)));
  return MakePush(0, 0, {{kKeyA, data}});
}

// Over 60 lines because it is a table: one entry per seed of the push
// corpus, read top to bottom; split up, the list of cases would scatter.
std::vector<Seed> PushSeeds() {
  const auto bsp = Setup(v1::CONSISTENCY_MODE_BSP);
  const auto asp = Setup(v1::CONSISTENCY_MODE_ASP);
  const auto ssp = Setup(v1::CONSISTENCY_MODE_SSP);
  const auto grad = [](uint64_t seed) { return GradientValues(kNumelA, seed); };
  std::vector<float> nan_values = grad(1), inf_values = grad(1);
  nan_values[3] = std::nanf("");
  inf_values[5] = -std::numeric_limits<float>::infinity();
  const std::vector<float> huge(kNumelA, 3e38f);
  v1::ChunkData no_payload;
  no_payload.set_numel(kNumelA);
  v1::ChunkData unknown_type = DenseData(grad(2));
  unknown_type.mutable_dense()->set_value_type(static_cast<v1::ValueType>(9));
  const v1::ChunkData a = DenseData(grad(3));

  return {
      {"bsp_dense_step", PushSeed(bsp)
                             .Raw(DensePush(0, 0, kKeyA, grad(0)))
                             .Raw(DensePush(1, 0, kKeyA, grad(1)))
                             .Pull(0, 0, 0, 1, 0)
                             .bytes()},
      {"bsp_duplicate", PushSeed(bsp)
                            .Raw(DensePush(0, 0, kKeyA, grad(0)))
                            .Raw(DensePush(0, 0, kKeyA, grad(0)))
                            .bytes()},
      {"bsp_future_step",
       PushSeed(bsp).Raw(DensePush(0, 1, kKeyA, grad(0))).bytes()},
      {"bsp_far_past_step", PushSeed(bsp)
                                .Steps(2, 6, 0)
                                .Raw(DensePush(0, 0, kKeyA, grad(9)))
                                .Raw(EncodedPush(1, 2, "topk"))
                                .bytes()},
      {"bsp_sign_all_chunks", PushSeed(bsp)
                                  .Raw(EncodedPush(0, 0, "onebit"))
                                  .Raw(EncodedPush(1, 0, "onebit"))
                                  .Pull(1, 2, 0, 1, 2)
                                  .bytes()},
      {"asp_sparse_topk", PushSeed(asp)
                              .Raw(EncodedPush(0, 0, "topk"))
                              .Raw(EncodedPush(1, 3, "topk"))
                              .bytes()},
      {"asp_qsgd", PushSeed(asp)
                       .Raw(EncodedPush(0, 0, "qsgd"))
                       .Raw(EncodedPush(1, 0, "qsgd"))
                       .bytes()},
      {"asp_randomk_fp16_bf16", PushSeed(asp)
                                    .Raw(EncodedPush(0, 0, "randomk"))
                                    .Raw(EncodedPush(0, 1, "fp16"))
                                    .Raw(EncodedPush(1, 0, "bf16"))
                                    .Pull(0, 1, 0, 0, 4)
                                    .bytes()},
      {"asp_step_past_window", PushSeed(asp)
                                   .Made(0, 0, 1, 0, 0)
                                   .Raw(DensePush(0, 66, kKeyA, grad(4)))
                                   .Raw(DensePush(0, 65, kKeyA, grad(4)))
                                   .bytes()},
      {"asp_huge_values", PushSeed(asp)
                              .Raw(DensePush(0, 0, kKeyA, huge))
                              .Raw(DensePush(0, 1, kKeyA, huge))
                              .Raw(DensePush(1, 0, kKeyA, huge))
                              .bytes()},
      {"ssp_beyond_staleness", PushSeed(ssp)
                                   .Made(0, 0, 7, 3, 1)
                                   .Made(0, 2, 7, 3, 2)
                                   .Made(0, 3, 7, 3, 3)
                                   .Made(1, 0, 7, 3, 4)
                                   .Made(0, 3, 7, 3, 3)
                                   .bytes()},
      {"ssp_three_workers",
       PushSeed(Setup(v1::CONSISTENCY_MODE_SSP, 3)).Steps(3, 3, 5).bytes()},
      {"bsp_deltas_pulls", PushSeed(Setup(v1::CONSISTENCY_MODE_BSP, 2, true))
                               .Steps(2, 3, 3)
                               .Pull(0, 0, 2, 3, 1)
                               .Pull(1, 1, 3, 3, 1)
                               .Pull(0, 2, 0, 3, 1)
                               .Pull(0, 0, 0, 9, 0)
                               .bytes()},
      {"index_out_of_range",
       PushSeed(asp).Raw(RawSparsePush(1, std::string("\x08", 1), 1)).bytes()},
      // Index 3, then a gap of 2^64 - 1: the second index would wrap
      // around to 3 again.
      {"index_gap_wraps_around",
       PushSeed(asp)
           .Raw(RawSparsePush(2, "\x03" + std::string(9, '\xff') + "\x01", 2))
           .bytes()},
      {"nnz_beyond_bytes",
       PushSeed(asp).Raw(RawSparsePush(6, std::string("\x01", 1), 1)).bytes()},
      {"nan_value",
       PushSeed(asp).Raw(DensePush(0, 0, kKeyA, nan_values)).bytes()},
      {"inf_value",
       PushSeed(bsp).Raw(DensePush(0, 0, kKeyA, inf_values)).bytes()},
      {"numel_mismatch",
       PushSeed(bsp).Raw(DensePush(0, 0, kKeyA, GradientValues(5, 1))).bytes()},
      {"unknown_encoding_and_type",
       PushSeed(asp)
           .Raw(MakePush(0, 0, {{kKeyA, no_payload}}))
           .Raw(MakePush(0, 0, {{kKeyA, unknown_type}}))
           .bytes()},
      {"foreign_chunk", PushSeed(bsp)
                            .Raw(DensePush(0, 0, kForeignKey, grad(5)))
                            .Made(0, 0, 0, 0, 1)
                            .bytes()},
      {"chunk_twice_and_empty",
       PushSeed(asp)
           .Raw(MakePush(0, 0, {{kKeyA, a}, {kKeyA, a}}))
           .Raw(MakePush(0, 0, {}))
           .bytes()},
      {"unknown_worker", PushSeed(ssp)
                             .Raw(DensePush(2, 0, kKeyA, grad(6)))
                             .Pull(2, 0, 0, 0, 0)
                             .Pull(0, 3, 0, 0, 14)
                             .bytes()},
  };
}

// Records of the init target.
class InitSeed {
 public:
  explicit InitSeed(uint8_t setup) { writer_.Byte(setup); }
  InitSeed& Raw(const v1::InitRequest& request) {
    writer_.Byte(kRawOp).Message(request);
    return *this;
  }
  InitSeed& Reference(uint8_t worker) {
    writer_.Byte(1).Byte(worker);
    return *this;
  }
  InitSeed& Conflict(uint8_t which) {
    writer_.Byte(2).Byte(which);
    return *this;
  }
  std::string bytes() const { return writer_.bytes(); }

 private:
  InputWriter writer_;
};

// Setup byte of the init target: fresh-shard flags in bits 0-1, the
// reference config's ShardSetup above.
uint8_t InitSetup(ShardSetup reference, bool fixed_workers, bool fixed_bsp) {
  return static_cast<uint8_t>((reference.ToByte() << 2) |
                              (fixed_workers ? 1 : 0) | (fixed_bsp ? 2 : 0));
}

v1::InitRequest Changed(const std::function<void(v1::InitRequest*)>& change,
                        ShardSetup setup = ShardSetup()) {
  v1::InitRequest request = MakeInit(MakeConfig(setup), 0);
  change(&request);
  return request;
}

// Over 60 lines because it is a table: one entry per seed of the init
// corpus, as PushSeeds.
std::vector<Seed> InitSeeds() {
  const auto bsp = Setup(v1::CONSISTENCY_MODE_BSP);
  const auto asp_deltas = Setup(v1::CONSISTENCY_MODE_ASP, 2, true);
  const uint8_t plain = InitSetup(bsp, false, false);
  const v1::InitRequest reference = MakeInit(MakeConfig(bsp), 0);
  auto config = [](v1::InitRequest* r) { return r->mutable_config(); };
  auto initial = [](v1::InitRequest* r, int i) {
    return r->mutable_chunks(i)->mutable_initial();
  };

  std::vector<Seed> seeds = {
      {"valid_bsp", InitSeed(plain).Raw(reference).Reference(1).bytes()},
      {"valid_asp_deltas_then_identical",
       InitSeed(InitSetup(asp_deltas, true, false))
           .Raw(MakeInit(MakeConfig(asp_deltas), 1))
           .Reference(0)
           .Reference(3)
           .bytes()},
      {"valid_ssp_three_workers",
       InitSeed(InitSetup(Setup(v1::CONSISTENCY_MODE_SSP, 3), false, false))
           .Reference(2)
           .Conflict(1)
           .bytes()},
      {"fixed_flags_mismatch",
       InitSeed(InitSetup(Setup(v1::CONSISTENCY_MODE_ASP, 3), true, true))
           .Reference(0)
           .Raw(reference)
           .bytes()},
      {"numel_claim_over_limit", InitSeed(plain)
                                     .Raw(Changed([&](v1::InitRequest* r) {
                                       initial(r, 0)->set_numel(uint64_t{1}
                                                                << 40);
                                     }))
                                     .Raw(reference)
                                     .bytes()},
      // 3 chunks x 65536 workers: past the limit of progress entries.
      {"worker_count_amplification", InitSeed(plain)
                                         .Raw(Changed([&](v1::InitRequest* r) {
                                           config(r)->set_num_workers(65536);
                                         }))
                                         .Raw(reference)
                                         .bytes()},
      {"sparse_initial", InitSeed(plain)
                             .Raw(Changed([&](v1::InitRequest* r) {
                               v1::ChunkData* data = initial(r, 1);
                               data->clear_dense();
                               data->mutable_sparse()->set_nnz(0);
                               data->mutable_sparse()->set_value_type(
                                   v1::VALUE_TYPE_FP32);
                             }))
                             .bytes()},
      {"nan_initial", InitSeed(plain)
                          .Raw(Changed([&](v1::InitRequest* r) {
                            std::vector<float> values = InitialWeights(2);
                            values[1] = std::nanf("");
                            *initial(r, 2) = DenseData(values);
                          }))
                          .bytes()},
      {"fp16_initial", InitSeed(plain)
                           .Raw(Changed([&](v1::InitRequest* r) {
                             *initial(r, 0) = CompressedData(
                                 "fp16", InitialWeights(0), kChunkKeys[0], 0);
                           }))
                           .Conflict(4)
                           .bytes()},
      {"duplicate_key", InitSeed(plain)
                            .Raw(Changed([&](v1::InitRequest* r) {
                              r->mutable_chunks(1)->set_key(kChunkKeys[0]);
                            }))
                            .bytes()},
      {"other_shard", InitSeed(plain)
                          .Raw(Changed([](v1::InitRequest* r) {
                            r->set_shard_id(kShardId + 1);
                          }))
                          .bytes()},
      {"worker_out_of_range",
       InitSeed(plain)
           .Raw(Changed([](v1::InitRequest* r) { r->set_worker_id(2); }))
           .bytes()},
      {"no_chunks",
       InitSeed(plain)
           .Raw(Changed([](v1::InitRequest* r) { r->clear_chunks(); }))
           .bytes()},
      {"bad_configs",
       InitSeed(plain)
           .Raw(Changed(
               [&](v1::InitRequest* r) { config(r)->set_num_workers(0); }))
           .Raw(Changed([&](v1::InitRequest* r) {
             config(r)->set_mode(v1::CONSISTENCY_MODE_UNSPECIFIED);
           }))
           .Raw(Changed([&](v1::InitRequest* r) {
             config(r)->mutable_optimizer()->set_learning_rate(std::nanf(""));
           }))
           .Raw(Changed([&](v1::InitRequest* r) {
             config(r)->mutable_pull_encoding()->set_compressor("zip");
           }))
           .Raw(Changed([&](v1::InitRequest* r) {
             config(r)->set_num_shards(kNumShards + 1);
           }))
           .bytes()},
  };
  for (uint8_t which = 0; which < 7; ++which) {
    seeds.push_back({"conflict_" + std::to_string(which),
                     InitSeed(plain).Raw(reference).Conflict(which).bytes()});
  }
  return seeds;
}

// Collects what a shard journals, to frame it as log segments.
class RecordingJournal final : public ShardJournal {
 public:
  // Records are numbered from 1 across segments, as the log numbers them.
  uint64_t Append(JournalRecordType type, std::string payload) override {
    records_.push_back({++sequence_, type, std::move(payload)});
    return sequence_;
  }
  void WaitDurable(uint64_t) override {}
  // The image of a segment holding the records appended since the last
  // call.
  std::string TakeSegment(uint64_t generation) {
    std::string bytes = SegmentHeader(generation);
    for (const Record& record : records_) {
      AppendWalRecord(record.sequence, record.type, record.payload, &bytes);
    }
    records_.clear();
    return bytes;
  }
  static std::string SegmentHeader(uint64_t generation) {
    return WalSegmentHeader(generation);
  }

 private:
  struct Record {
    uint64_t sequence;
    JournalRecordType type;
    std::string payload;
  };
  std::vector<Record> records_;
  uint64_t sequence_ = 0;
};

// A BSP shard's history: Init and steps 0-1 in segment 1, the checkpoint,
// steps 2-3 in segment 2.
struct History {
  std::string checkpoint;
  std::string segment1;
  std::string segment2;
  ShardSnapshot snapshot;
};

void TrainSteps(Shard& shard, uint64_t from, uint64_t to) {
  for (uint64_t step = from; step < to; ++step) {
    for (uint32_t worker = 0; worker < 2; ++worker) {
      std::vector<std::pair<uint64_t, v1::ChunkData>> chunks;
      for (size_t i = 0; i < kNumChunks; ++i) {
        chunks.emplace_back(
            kChunkKeys[i],
            DenseData(GradientValues(kChunkNumels[i], step * 2 + worker + i)));
      }
      v1::PushResponse response;
      Check(shard.Push(MakePush(worker, step, chunks), &response).ok());
    }
  }
}

History MakeHistory() {
  RecordingJournal journal;
  Shard shard(MakeShardOptions());
  shard.set_journal(&journal);
  v1::InitResponse response;
  Check(shard
            .Init(MakeInit(MakeConfig(Setup(v1::CONSISTENCY_MODE_BSP, 2, true)),
                           0),
                  &response)
            .ok());
  TrainSteps(shard, 0, 2);
  History history;
  history.segment1 = journal.TakeSegment(1);
  history.snapshot = shard.Snapshot().value();
  history.checkpoint = SerializeSnapshot(history.snapshot);
  TrainSteps(shard, 2, 4);
  history.segment2 = journal.TakeSegment(2);
  return history;
}

// Bitwise CRC-32 (zlib's polynomial), to forge a checkpoint of another
// format version whose checksum holds.
uint32_t Crc32(absl::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char byte : bytes) {
    crc ^= static_cast<uint8_t>(byte);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return ~crc;
}

std::string Flipped(std::string bytes, size_t offset) {
  bytes[offset] ^= 0x40;
  return bytes;
}

// Flags of the restore target (restore_fuzz.cc).
enum RestoreFlags : uint8_t {
  kDiscard = 1,
  kNoReplay = 2,
  kCheckpoint = 4,
  kSegment1 = 8,
  kSegment2 = 16,
  kEverything = kCheckpoint | kSegment1 | kSegment2,
};

std::string RestoreInput(uint8_t flags, absl::string_view checkpoint,
                         absl::string_view segment1,
                         absl::string_view segment2) {
  InputWriter writer;
  writer.Byte(flags).Bytes(checkpoint).Bytes(segment1).Tail(segment2);
  return writer.bytes();
}

// Over 60 lines because it is a table: one entry per seed of the restore
// corpus, each damaged one also with the discard flag.
std::vector<Seed> RestoreSeeds() {
  const History h = MakeHistory();
  std::string other_version = h.checkpoint;
  other_version[8] = 99;  // No format has this version.
  const uint32_t crc = Crc32(
      absl::string_view(other_version).substr(0, other_version.size() - 4));
  std::memcpy(&other_version[other_version.size() - 4], &crc, 4);
  ShardSnapshot nan_snapshot = h.snapshot;
  nan_snapshot.chunks[0].weights[1] = std::nanf("");
  ShardSnapshot inf_snapshot = h.snapshot;
  inf_snapshot.chunks[1].shadow[0] = std::numeric_limits<float>::infinity();
  std::string refused = RecordingJournal::SegmentHeader(2);
  v1::InitRequest other_job =
      MakeInit(MakeConfig(Setup(v1::CONSISTENCY_MODE_ASP)), 0);
  AppendWalRecord(1, JournalRecordType::kInit, other_job.SerializeAsString(),
                  &refused);
  // Inside the first record's payload (16-byte header, 17-byte frame).
  const size_t first_payload = 16 + 17 + 4;

  std::vector<Seed> seeds = {
      {"valid_checkpoint_and_log",
       RestoreInput(kEverything, h.checkpoint, h.segment1, h.segment2)},
      {"valid_log_only",
       RestoreInput(kSegment1 | kSegment2, "", h.segment1, h.segment2)},
      {"valid_checkpoint_no_replay",
       RestoreInput(kCheckpoint | kNoReplay, h.checkpoint, "", "")},
      {"torn_tail", RestoreInput(kEverything, h.checkpoint, h.segment1,
                                 h.segment2.substr(0, h.segment2.size() - 5))},
      {"torn_tail_zeros", RestoreInput(kEverything, h.checkpoint, h.segment1,
                                       h.segment2 + std::string(40, '\0'))},
  };
  const std::vector<Seed> damaged = {
      {"corrupt_checkpoint",
       RestoreInput(kEverything, Flipped(h.checkpoint, 60), h.segment1,
                    h.segment2)},
      {"other_version_checkpoint",
       RestoreInput(kCheckpoint | kSegment2, other_version, "", h.segment2)},
      {"nan_weight_checkpoint",
       RestoreInput(kCheckpoint, SerializeSnapshot(nan_snapshot), "", "")},
      {"inf_shadow_checkpoint",
       RestoreInput(kCheckpoint | kNoReplay, SerializeSnapshot(inf_snapshot),
                    "", "")},
      {"refused_record",
       RestoreInput(kCheckpoint | kSegment2, h.checkpoint, "", refused)},
      {"corrupt_record_then_later_segment",
       RestoreInput(kEverything, h.checkpoint,
                    Flipped(h.segment1, first_payload), h.segment2)},
      {"corrupt_record_mid_newest_segment",
       RestoreInput(kEverything, h.checkpoint, h.segment1,
                    Flipped(h.segment2, first_payload))},
      {"torn_older_segment",
       RestoreInput(kEverything, h.checkpoint,
                    h.segment1.substr(0, h.segment1.size() - 3), h.segment2)},
      {"bad_segment_header",
       RestoreInput(kCheckpoint | kSegment2, h.checkpoint, "", "GWAX")},
  };
  for (const Seed& seed : damaged) {
    seeds.push_back(seed);
    std::string discard = seed.bytes;
    discard[0] = static_cast<char>(discard[0] | kDiscard);
    seeds.push_back({seed.name + "_discard", discard});
  }
  return seeds;
}

bool WriteSeeds(const std::string& dir, const std::vector<Seed>& seeds) {
  ::mkdir(dir.c_str(), 0755);
  for (const Seed& seed : seeds) {
    Check(seed.bytes.size() < 4096);
    std::ofstream out(dir + "/" + seed.name, std::ios::binary);
    out << seed.bytes;
    if (!out.good()) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(),
                   seed.name.c_str());
      return false;
    }
  }
  std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
  return true;
}

bool WriteSeeds(const std::string& dir,
                const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<Seed> seeds;
  for (const auto& [name, bytes] : pairs) seeds.push_back({name, bytes});
  return WriteSeeds(dir, seeds);
}

}  // namespace
}  // namespace gradwire::fuzz

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: %s DIR\n"
                 "Writes the seeds of gradwire-fuzz-push to DIR/push, of "
                 "gradwire-fuzz-init to DIR/init, of gradwire-fuzz-restore "
                 "to DIR/restore, of gradwire-fuzz-getinfo to DIR/getinfo and "
                 "of gradwire-fuzz-pull to DIR/pull.\n",
                 argv[0]);
    return argc == 2 ? 0 : 2;
  }
  const std::string dir = argv[1];
  ::mkdir(dir.c_str(), 0755);
  const bool ok =
      gradwire::fuzz::WriteSeeds(dir + "/push", gradwire::fuzz::PushSeeds()) &&
      gradwire::fuzz::WriteSeeds(dir + "/init", gradwire::fuzz::InitSeeds()) &&
      gradwire::fuzz::WriteSeeds(dir + "/restore",
                                 gradwire::fuzz::RestoreSeeds()) &&
      gradwire::fuzz::WriteSeeds(dir + "/getinfo",
                                 gradwire::fuzz::GetInfoSeeds()) &&
      gradwire::fuzz::WriteSeeds(dir + "/pull", gradwire::fuzz::PullSeeds());
  return ok ? 0 : 1;
}
