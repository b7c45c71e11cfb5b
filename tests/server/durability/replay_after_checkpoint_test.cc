// A shard killed after a checkpoint restarts from it and replays only the
// write-ahead log records that the checkpoint does not hold
// (ShardSnapshot::journal_sequence, wal_replay.h). The history that matters:
// a worker is dropped from the live set, rejoins, a checkpoint is written,
// the shard dies. Replaying the old drop over the checkpoint would complete
// the current BSP step without that worker (or move the ASP/SSP clock) and
// make its next push a duplicate. Each test compares the restored shard with
// one that ran the same requests without a crash, bit for bit.
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/durability/checkpoint_files.h"
#include "server/durability/checkpoint_format.h"
#include "server/durability/checkpointer.h"
#include "server/durability/durable_state.h"
#include "server/durability/write_ahead_log.h"
#include "tests/server/durability/durable_shard_util.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using namespace shard_test;  // NOLINT: test helpers

constexpr uint32_t kWorkers = 3;

struct Mode {
  const char* name;
  v1::ConsistencyMode mode;
  uint32_t staleness;
};

void PrintTo(const Mode& mode, std::ostream* os) { *os << mode.name; }

v1::TrainingConfig ModeConfig(const Mode& mode) {
  v1::TrainingConfig config = Config(kWorkers, mode.mode, mode.staleness);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  return config;
}

void PushBoth(Shard& shard, uint32_t worker, uint64_t step) {
  ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyA, kNumelA)).ok())
      << "worker " << worker << " step " << step;
  ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyB, kNumelB)).ok())
      << "worker " << worker << " step " << step;
}

void InitAs(Shard& shard, uint32_t worker, const Mode& mode) {
  v1::InitResponse response;
  ASSERT_TRUE(shard
                  .Init(InitRequest(worker, ModeConfig(mode), DefaultChunks()),
                        &response)
                  .ok());
}

// Up to the checkpoint: two full steps; worker 2 silent in step 2 and
// dropped; it rejoins by Init; workers 0 and 1 push step 3 (in BSP the step
// then waits for worker 2).
void BeforeCheckpoint(Shard& shard, const Mode& mode) {
  ASSERT_NO_FATAL_FAILURE(InitAs(shard, 0, mode));
  for (uint64_t step = 0; step < 2; ++step) {
    for (uint32_t worker = 0; worker < kWorkers; ++worker) {
      ASSERT_NO_FATAL_FAILURE(PushBoth(shard, worker, step));
    }
  }
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 0, 2));
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 1, 2));
  ASSERT_TRUE(shard.DropWorker(2).ok());
  ASSERT_FALSE(shard.IsLive(2));
  ASSERT_NO_FATAL_FAILURE(InitAs(shard, 2, mode));
  ASSERT_TRUE(shard.IsLive(2));
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 0, 3));
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 1, 3));
}

// After it: worker 2's push of step 3 must be applied (not a duplicate),
// then worker 1 is dropped in step 4 and rejoins.
void AfterCheckpoint(Shard& shard, const Mode& mode) {
  const v1::ChunkAck ack = PushOne(shard, DensePush(2, 3, kKeyA, kNumelA));
  EXPECT_FALSE(ack.duplicate()) << "worker 2's step 3 was lost";
  ASSERT_TRUE(Push(shard, DensePush(2, 3, kKeyB, kNumelB)).ok());
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 0, 4));
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 2, 4));
  ASSERT_TRUE(shard.DropWorker(1).ok());
  ASSERT_NO_FATAL_FAILURE(InitAs(shard, 1, mode));
  ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 0, 5));
}

void ExpectSameState(const Shard& restored, const Shard& reference) {
  durable_test::ExpectSameState(restored, reference, kWorkers);
}

class ReplayAfterCheckpointTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gradwire_replay_after_checkpoint_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<WriteAheadLog> OpenLog() {
    return durable_test::OpenLog(dir_, kShardId);
  }

  // A checkpoint as the server writes one.
  void Checkpoint(const Shard& shard, WriteAheadLog* wal) {
    durable_test::WriteCheckpointNow(shard, dir_, kShardId, wal);
  }

  // A new shard restored from the directory as the server restores one.
  std::unique_ptr<Shard> Restart() {
    return durable_test::RestartFrom(dir_, Options());
  }

  // The shard killed: no final checkpoint, nothing written after this.
  static void Kill(std::unique_ptr<Shard> shard,
                   std::unique_ptr<WriteAheadLog> wal) {
    shard.reset();
    wal.reset();
  }

  std::string dir_;
};

TEST_P(ReplayAfterCheckpointTest, KilledRightAfterTheCheckpoint) {
  const Mode& mode = GetParam();
  {
    auto wal = OpenLog();
    ASSERT_NE(wal, nullptr);
    auto shard = std::make_unique<Shard>(Options());
    shard->set_journal(wal.get());
    ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(*shard, mode));
    ASSERT_NO_FATAL_FAILURE(Checkpoint(*shard, wal.get()));
    Kill(std::move(shard), std::move(wal));
  }
  Shard reference(Options());
  ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(reference, mode));
  std::unique_ptr<Shard> restored = Restart();
  ASSERT_TRUE(restored->initialized());
  ExpectSameState(*restored, reference);
  // And they go on alike: worker 2's step 3 is applied in both.
  ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(*restored, mode));
  ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(reference, mode));
  ExpectSameState(*restored, reference);
}

TEST_P(ReplayAfterCheckpointTest, KilledWithRecordsAfterTheCheckpoint) {
  const Mode& mode = GetParam();
  {
    auto wal = OpenLog();
    ASSERT_NE(wal, nullptr);
    auto shard = std::make_unique<Shard>(Options());
    shard->set_journal(wal.get());
    ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(*shard, mode));
    ASSERT_NO_FATAL_FAILURE(Checkpoint(*shard, wal.get()));
    ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(*shard, mode));
    Kill(std::move(shard), std::move(wal));
  }
  Shard reference(Options());
  ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(reference, mode));
  ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(reference, mode));
  std::unique_ptr<Shard> restored = Restart();
  ASSERT_TRUE(restored->initialized());
  ExpectSameState(*restored, reference);
}

// The restarted shard's log numbers its records after those it restored, so
// a second kill (before any new checkpoint) replays them.
TEST_P(ReplayAfterCheckpointTest, ASecondKillReplaysTheNewLog) {
  const Mode& mode = GetParam();
  {
    auto wal = OpenLog();
    ASSERT_NE(wal, nullptr);
    auto shard = std::make_unique<Shard>(Options());
    shard->set_journal(wal.get());
    ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(*shard, mode));
    ASSERT_NO_FATAL_FAILURE(Checkpoint(*shard, wal.get()));
    Kill(std::move(shard), std::move(wal));
  }
  {
    std::unique_ptr<Shard> shard = Restart();
    const uint64_t restored_sequence = shard->journal_sequence();
    EXPECT_GT(restored_sequence, 0u);
    auto wal = OpenLog();
    ASSERT_NE(wal, nullptr);
    shard->set_journal(wal.get());
    ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(*shard, mode));
    EXPECT_GT(shard->journal_sequence(), restored_sequence);
    Kill(std::move(shard), std::move(wal));
  }
  Shard reference(Options());
  ASSERT_NO_FATAL_FAILURE(BeforeCheckpoint(reference, mode));
  ASSERT_NO_FATAL_FAILURE(AfterCheckpoint(reference, mode));
  std::unique_ptr<Shard> restored = Restart();
  ASSERT_TRUE(restored->initialized());
  ExpectSameState(*restored, reference);
}

// What a shard journals, kept in memory, to be written as a format-1 segment.
class RecordingJournal final : public ShardJournal {
 public:
  uint64_t Append(JournalRecordType type, std::string payload) override {
    records_.push_back({type, std::move(payload)});
    return records_.size();
  }
  void WaitDurable(uint64_t) override {}
  std::vector<WalRecord> Take() { return std::move(records_); }

 private:
  std::vector<WalRecord> records_;
};

// Bitwise CRC-32 (zlib's polynomial), to forge format-1 files.
uint32_t ReferenceCrc32(absl::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : bytes) {
    crc ^= static_cast<uint8_t>(c);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return ~crc;
}

template <typename T>
void Put(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

// A segment as the format-1 server wrote it: no sequence numbers.
std::string FormatOneSegment(uint64_t generation,
                             const std::vector<WalRecord>& records) {
  std::string bytes("GWAL", 4);
  Put<uint32_t>(kWalFormatVersionUnnumbered, &bytes);
  Put<uint64_t>(generation, &bytes);
  for (const WalRecord& record : records) {
    const char type = static_cast<char>(record.type);
    Put<uint32_t>(record.payload.size(), &bytes);
    Put<uint32_t>(ReferenceCrc32(std::string(1, type) + record.payload),
                  &bytes);
    bytes.push_back(type);
    bytes.append(record.payload);
  }
  return bytes;
}

// A checkpoint as the format-1 server wrote it: no journal sequence.
// The snapshot must have every worker live and none revived, so that its
// live sets are two zero counts.
std::string FormatOneCheckpoint(const ShardSnapshot& snapshot) {
  for (const ChunkSnapshot& chunk : snapshot.chunks) {
    EXPECT_EQ(chunk.live.num_dropped(), 0u);
  }
  EXPECT_TRUE(snapshot.revived_by_init.empty());
  std::string image = SerializeSnapshot(snapshot);
  // The journal sequence and the live sets' two counts.
  image.erase(image.size() - 4 - 24, 24);
  const uint32_t version = kCheckpointFormatVersionWithoutJournal;
  std::memcpy(&image[8], &version, 4);
  const uint64_t payload = image.size() - 24;
  std::memcpy(&image[12], &payload, 8);
  const uint32_t crc =
      ReferenceCrc32(absl::string_view(image).substr(0, image.size() - 4));
  std::memcpy(&image[image.size() - 4], &crc, 4);
  return image;
}

// A directory a format-1 server left (checkpoint and unnumbered segments) is
// restored by replaying the whole log; once this build has checkpointed, the
// unnumbered records are skipped as held by its checkpoint.
TEST_P(ReplayAfterCheckpointTest, AFormatOneDirectoryIsUpgraded) {
  const Mode& mode = GetParam();
  // Format 1: Init and steps 0-1 in segment 1, the checkpoint, step 2 and
  // worker 2's drop in step 3 in segment 2, then a kill.
  {
    RecordingJournal journal;
    Shard shard(Options());
    shard.set_journal(&journal);
    ASSERT_NO_FATAL_FAILURE(InitAs(shard, 0, mode));
    for (uint64_t step = 0; step < 2; ++step) {
      for (uint32_t worker = 0; worker < kWorkers; ++worker) {
        ASSERT_NO_FATAL_FAILURE(PushBoth(shard, worker, step));
      }
    }
    ASSERT_NO_FATAL_FAILURE(WriteFile(dir_ + "/" + WalSegmentFileName(1),
                                      FormatOneSegment(1, journal.Take())));
    absl::StatusOr<ShardSnapshot> snapshot = shard.Snapshot();
    ASSERT_TRUE(snapshot.ok());
    ASSERT_NO_FATAL_FAILURE(WriteFile(
        dir_ + "/" + CheckpointFileName(CheckpointSequence(*snapshot)),
        FormatOneCheckpoint(*snapshot)));
    for (uint32_t worker = 0; worker < kWorkers; ++worker) {
      ASSERT_NO_FATAL_FAILURE(PushBoth(shard, worker, 2));
    }
    ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 0, 3));
    ASSERT_NO_FATAL_FAILURE(PushBoth(shard, 1, 3));
    ASSERT_TRUE(shard.DropWorker(2).ok());
    ASSERT_NO_FATAL_FAILURE(WriteFile(dir_ + "/" + WalSegmentFileName(2),
                                      FormatOneSegment(2, journal.Take())));
  }
  // The same without a crash.
  Shard reference(Options());
  ASSERT_NO_FATAL_FAILURE(InitAs(reference, 0, mode));
  for (uint64_t step = 0; step < 3; ++step) {
    for (uint32_t worker = 0; worker < kWorkers; ++worker) {
      ASSERT_NO_FATAL_FAILURE(PushBoth(reference, worker, step));
    }
  }
  ASSERT_NO_FATAL_FAILURE(PushBoth(reference, 0, 3));
  ASSERT_NO_FATAL_FAILURE(PushBoth(reference, 1, 3));
  ASSERT_TRUE(reference.DropWorker(2).ok());
  // This build: the whole format-1 log replayed, then a rejoin, a
  // checkpoint (written by hand, so that the format-1 segments stay), more
  // records and a kill.
  {
    std::unique_ptr<Shard> shard = Restart();
    ExpectSameState(*shard, reference);
    EXPECT_EQ(shard->journal_sequence(), 0u);
    auto wal = OpenLog();
    ASSERT_NE(wal, nullptr);
    shard->set_journal(wal.get());
    ASSERT_NO_FATAL_FAILURE(InitAs(*shard, 2, mode));
    ASSERT_NO_FATAL_FAILURE(PushBoth(*shard, 0, 4));
    ASSERT_TRUE(wal->Rotate().ok());
    absl::StatusOr<ShardSnapshot> snapshot = shard->Snapshot();
    ASSERT_TRUE(snapshot.ok());
    EXPECT_GT(snapshot->journal_sequence.value_or(0), 0u);
    ASSERT_TRUE(
        WriteCheckpoint(dir_, *snapshot, CheckpointSequence(*snapshot)).ok());
    ASSERT_NO_FATAL_FAILURE(PushBoth(*shard, 1, 4));
    Kill(std::move(shard), std::move(wal));
  }
  ASSERT_NO_FATAL_FAILURE(InitAs(reference, 2, mode));
  ASSERT_NO_FATAL_FAILURE(PushBoth(reference, 0, 4));
  ASSERT_NO_FATAL_FAILURE(PushBoth(reference, 1, 4));
  ASSERT_TRUE(fs::exists(dir_ + "/" + WalSegmentFileName(1)));
  std::unique_ptr<Shard> restored = Restart();
  ASSERT_TRUE(restored->initialized());
  ExpectSameState(*restored, reference);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ReplayAfterCheckpointTest,
    ::testing::Values(Mode{"bsp", v1::CONSISTENCY_MODE_BSP, 0},
                      Mode{"asp", v1::CONSISTENCY_MODE_ASP, 0},
                      Mode{"ssp", v1::CONSISTENCY_MODE_SSP, 2}),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace gradwire
