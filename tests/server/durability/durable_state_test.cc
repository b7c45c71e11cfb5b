// The start-up rule over a checkpoint directory (durable_state.h): state
// that cannot be read completely is refused with DATA_LOSS and left as it
// is, or, with discard_unreadable, moved into discarded-*/ before the shard
// starts fresh; the torn tail of the newest log segment is accepted and cut.
#include "server/durability/durable_state.h"

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/durability/checkpoint_files.h"
#include "server/durability/checkpoint_format.h"
#include "server/durability/checkpointer.h"
#include "server/durability/write_ahead_log.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using namespace shard_test;  // NOLINT: test helpers
using ::testing::HasSubstr;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

// Bitwise CRC-32 (zlib's polynomial), to forge images with valid checksums.
uint32_t ReferenceCrc32(const std::string& bytes, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= static_cast<uint8_t>(bytes[i]);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return ~crc;
}

v1::TrainingConfig DeltaConfig() {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  return config;
}

void TrainSteps(Shard& shard, uint64_t from, uint64_t to) {
  for (uint64_t step = from; step < to; ++step) {
    for (uint32_t worker = 0; worker < 2; ++worker) {
      ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyA, kNumelA)).ok());
      ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyB, kNumelB)).ok());
    }
  }
}

class DurableStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "durable_state_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/shard";
  }
  void TearDown() override { fs::remove_all(root_); }

  // What a shard run with a checkpoint every 3 steps leaves behind: Init
  // and steps 0-2 in segment 1 (removed, as the Checkpointer does), the
  // checkpoint of sequence 6, steps 3-4 in segment 2, step 5 in segment 3
  // (the newest). Returns the shard's final digest.
  uint64_t WriteHistory() {
    auto wal = WriteAheadLog::Open({dir_});
    EXPECT_TRUE(wal.ok()) << wal.status();
    Shard shard(Options());
    shard.set_journal(wal->get());
    v1::InitResponse response;
    EXPECT_TRUE(
        shard.Init(InitRequest(0, DeltaConfig(), DefaultChunks()), &response)
            .ok());
    TrainSteps(shard, 0, 3);
    absl::StatusOr<uint64_t> rotation = (*wal)->Rotate();
    EXPECT_TRUE(rotation.ok());
    absl::StatusOr<ShardSnapshot> snapshot = shard.Snapshot();
    EXPECT_TRUE(snapshot.ok());
    EXPECT_TRUE(
        WriteCheckpoint(dir_, *snapshot, CheckpointSequence(*snapshot)).ok());
    (*wal)->RemoveSegmentsBefore(*rotation);
    TrainSteps(shard, 3, 5);
    EXPECT_TRUE((*wal)->Rotate().ok());
    TrainSteps(shard, 5, 6);
    return shard.StateDigest();
  }

  std::string CheckpointPath() const {
    return dir_ + "/" + CheckpointFileName(6);
  }
  std::string SegmentPath(uint64_t generation) const {
    return dir_ + "/" + WalSegmentFileName(generation);
  }

  // Restores into a new shard, as a starting server does; the shard that
  // ends up used is left in shard_.
  absl::StatusOr<RestoredDurableState> Restore(bool discard = false) {
    DurableStateOptions options;
    options.dir = dir_;
    options.shard_id = kShardId;
    options.discard_unreadable = discard;
    return RestoreOrDiscardDurableState(
        options, [&]() -> absl::StatusOr<Shard*> {
          shard_ = std::make_unique<Shard>(Options());
          return shard_.get();
        });
  }

  // Name -> bytes of every file in `dir` (recursing into folders).
  std::map<std::string, std::string> Files(const std::string& dir) const {
    std::map<std::string, std::string> files;
    if (!fs::exists(dir)) return files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      files[fs::relative(entry.path(), dir).string()] =
          ReadBytes(entry.path().string());
    }
    return files;
  }

  // The discarded-* folders in dir_.
  std::vector<std::string> DiscardFolders() const {
    std::vector<std::string> folders;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && absl::StartsWith(name, "discarded-")) {
        folders.push_back(entry.path().string());
      }
    }
    return folders;
  }

  std::string root_;
  std::string dir_;
  std::unique_ptr<Shard> shard_;
};

TEST_F(DurableStateTest, ACompleteHistoryRestoresExactly) {
  const uint64_t digest = WriteHistory();
  absl::StatusOr<RestoredDurableState> restored = Restore();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->checkpoint_restored);
  EXPECT_FALSE(restored->discarded);
  EXPECT_EQ(restored->replay.segments, 2u);
  EXPECT_EQ(shard_->StateDigest(), digest);
}

class DamagedStateTest;

// One way to damage the history, and what the refusal must say.
struct Damage {
  std::string name;
  std::function<void(DamagedStateTest*)> apply;
  std::string message;
};

class DamagedStateTest : public DurableStateTest {
 protected:
  void FlipByte(const std::string& path, size_t offset) {
    std::string bytes = ReadBytes(path);
    ASSERT_LT(offset, bytes.size());
    bytes[offset] ^= 0x40;
    WriteBytes(path, bytes);
  }
  // Rewrites the checkpoint with `edit` applied to its snapshot.
  void EditCheckpoint(const std::function<void(ShardSnapshot*)>& edit) {
    absl::StatusOr<ShardSnapshot> snapshot =
        ReadCheckpointFile(CheckpointPath());
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    edit(&*snapshot);
    ASSERT_TRUE(WriteCheckpoint(dir_, *snapshot, 6).ok());
  }
  // Appends segment 4 holding `type` with `payload`.
  void AppendSegment(JournalRecordType type, const std::string& payload) {
    std::string bytes = WalSegmentHeader(4);
    // After every record the checkpoint holds.
    AppendWalRecord(1000, type, payload, &bytes);
    WriteBytes(SegmentPath(4), bytes);
  }

  static std::vector<Damage> Damages();
};

std::vector<Damage> DamagedStateTest::Damages() {
  return {
      {"corrupt only checkpoint",
       [](DamagedStateTest* t) { t->FlipByte(t->CheckpointPath(), 100); },
       "checksum"},
      {"other-version checkpoint",
       [](DamagedStateTest* t) {
         std::string image = ReadBytes(t->CheckpointPath());
         const uint32_t version = kCheckpointFormatVersion + 1;
         std::memcpy(&image[8], &version, 4);
         const uint32_t crc = ReferenceCrc32(image, image.size() - 4);
         std::memcpy(&image[image.size() - 4], &crc, 4);
         WriteBytes(t->CheckpointPath(), image);
       },
       "format version 4"},
      {"newer corrupt checkpoint over a valid one",
       [](DamagedStateTest* t) {
         WriteBytes(t->dir_ + "/" + CheckpointFileName(9), "GWCKPT01 torn");
       },
       "1 older checkpoint(s) not used"},
      {"non-finite weight",
       [](DamagedStateTest* t) {
         t->EditCheckpoint([](ShardSnapshot* s) {
           s->chunks[0].weights[3] = std::numeric_limits<float>::quiet_NaN();
         });
       },
       "weights[3] is nan, not finite"},
      {"infinite shadow",
       [](DamagedStateTest* t) {
         t->EditCheckpoint([](ShardSnapshot* s) {
           s->chunks[1].shadow[0] = -std::numeric_limits<float>::infinity();
         });
       },
       "shadow[0] is -inf, not finite"},
      {"refused log record",
       [](DamagedStateTest* t) {
         // An Init of another job: the shard refuses it on replay.
         v1::TrainingConfig other = DeltaConfig();
         other.mutable_optimizer()->set_learning_rate(kLearningRate * 2);
         t->AppendSegment(
             JournalRecordType::kInit,
             InitRequest(0, other, DefaultChunks()).SerializeAsString());
       },
       "(Init) refused on replay"},
      {"corrupt record mid-segment, later segment follows",
       [](DamagedStateTest* t) {
         // Inside the first record's payload of segment 2.
         t->FlipByte(t->SegmentPath(2), 16 + 9 + 4);
       },
       "and 1 newer segment(s) follow"},
      {"corrupt record mid-segment of the newest segment",
       [](DamagedStateTest* t) { t->FlipByte(t->SegmentPath(3), 16 + 9 + 4); },
       "with more log after it"},
      {"torn tail of an older segment",
       [](DamagedStateTest* t) {
         const std::string bytes = ReadBytes(t->SegmentPath(2));
         WriteBytes(t->SegmentPath(2), bytes.substr(0, bytes.size() - 3));
       },
       "torn record"},
  };
}

TEST_F(DamagedStateTest, IsRefusedNamingTheFileAndChangesNothing) {
  for (const Damage& damage : Damages()) {
    SCOPED_TRACE(damage.name);
    fs::remove_all(dir_);
    WriteHistory();
    damage.apply(this);
    const std::map<std::string, std::string> before = Files(dir_);
    testing::internal::CaptureStderr();
    absl::StatusOr<RestoredDurableState> restored = Restore();
    testing::internal::GetCapturedStderr();
    ASSERT_FALSE(restored.ok());
    EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss)
        << restored.status();
    EXPECT_THAT(restored.status().message(), HasSubstr(damage.message));
    EXPECT_THAT(restored.status().message(), HasSubstr(dir_ + "/"));
    EXPECT_EQ(restored.status().message().find('\n'), absl::string_view::npos);
    EXPECT_EQ(Files(dir_), before);
  }
}

TEST_F(DamagedStateTest, WithDiscardIsMovedAsideAndTheShardStartsFresh) {
  for (const Damage& damage : Damages()) {
    SCOPED_TRACE(damage.name);
    fs::remove_all(dir_);
    WriteHistory();
    damage.apply(this);
    const std::map<std::string, std::string> before = Files(dir_);
    testing::internal::CaptureStderr();
    absl::StatusOr<RestoredDurableState> restored = Restore(true);
    const std::string log = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_TRUE(restored->discarded);
    EXPECT_FALSE(restored->checkpoint_restored);
    EXPECT_FALSE(shard_->initialized());
    // Every file, byte for byte, now under the one discarded-*/ folder.
    const std::vector<std::string> folders = DiscardFolders();
    ASSERT_EQ(folders.size(), 1u);
    EXPECT_EQ(restored->discarded_state.folder, folders[0]);
    EXPECT_EQ(Files(folders[0]), before);
    EXPECT_EQ(Files(dir_).size(), before.size());
    for (const auto& [name, bytes] : before) {
      EXPECT_THAT(log, HasSubstr(absl::StrCat("moved ", dir_, "/", name)));
    }
    EXPECT_THAT(log, HasSubstr(damage.message));
  }
}

TEST_F(DurableStateTest, TornTailOfTheNewestSegmentIsAcceptedAndCut) {
  WriteHistory();
  const std::string newest = ReadBytes(SegmentPath(3));
  for (const std::string& tail :
       {std::string("\x30\x00\x00", 3), std::string(40, '\0')}) {
    SCOPED_TRACE(tail.size());
    WriteBytes(SegmentPath(3), newest + tail);
    testing::internal::CaptureStderr();
    absl::StatusOr<RestoredDurableState> restored = Restore();
    const std::string log = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(restored->replay.torn_segments, 1u);
    EXPECT_THAT(log, HasSubstr("cutting it"));
    // Cut back to its last whole record, so that it ends cleanly once a
    // new segment follows it.
    EXPECT_EQ(ReadBytes(SegmentPath(3)), newest);
  }
}

TEST_F(DurableStateTest, ATornRecordCutShortIsLostAndTheRestRestores) {
  WriteHistory();
  const std::string newest = ReadBytes(SegmentPath(3));
  WriteBytes(SegmentPath(3), newest.substr(0, newest.size() - 5));
  testing::internal::CaptureStderr();
  absl::StatusOr<RestoredDurableState> restored = Restore();
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(shard_->initialized());
  // The restarted server starts segment 4; a restart after it still reads
  // the whole log, segment 3 included.
  ASSERT_TRUE(WriteAheadLog::Open({dir_}).ok());
  testing::internal::CaptureStderr();
  restored = Restore();
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(restored.ok()) << restored.status();
}

TEST_F(DurableStateTest, ACheckpointOfAnotherShardIsNeverDiscarded) {
  WriteHistory();
  absl::StatusOr<ShardSnapshot> snapshot = ReadCheckpointFile(CheckpointPath());
  ASSERT_TRUE(snapshot.ok());
  snapshot->shard_id = kShardId + 1;
  ASSERT_TRUE(WriteCheckpoint(dir_, *snapshot, 6).ok());
  const std::map<std::string, std::string> before = Files(dir_);
  testing::internal::CaptureStderr();
  absl::StatusOr<RestoredDurableState> restored = Restore(true);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition)
      << restored.status();
  EXPECT_EQ(Files(dir_), before);
}

TEST_F(DurableStateTest, DiscardKeepsOtherFilesAndNeverReusesAFolder) {
  WriteHistory();
  WriteBytes(dir_ + "/notes.txt", "kept");
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  testing::internal::CaptureStderr();
  absl::StatusOr<DiscardedDurableState> first =
      DiscardDurableState(dir_, kShardId, now);
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->folder, dir_ + "/discarded-1700000000");
  EXPECT_EQ(first->files.size(), 3u);  // the checkpoint, segments 2 and 3
  WriteBytes(SegmentPath(7), "x");
  testing::internal::CaptureStderr();
  absl::StatusOr<DiscardedDurableState> second =
      DiscardDurableState(dir_, kShardId, now);
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->folder, dir_ + "/discarded-1700000000-1");
  EXPECT_EQ(second->files, std::vector<std::string>{WalSegmentFileName(7)});
  EXPECT_EQ(ReadBytes(dir_ + "/notes.txt"), "kept");
  // Nothing left to move: no folder.
  absl::StatusOr<DiscardedDurableState> third =
      DiscardDurableState(dir_, kShardId, now);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->folder.empty());
  EXPECT_EQ(DiscardFolders().size(), 2u);
}

}  // namespace
}  // namespace gradwire
