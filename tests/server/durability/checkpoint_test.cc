// The checkpoint format (checkpoint_format.h) and checkpoint files in a
// directory (checkpoint_files.h), one test since they were one unit.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/durability/checkpoint_files.h"
#include "server/durability/checkpoint_format.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<float> RandomFloats(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// Every field non-default, vectors of varying lengths.
ShardSnapshot MakeSnapshot(uint64_t seed, int num_chunks = 4) {
  std::mt19937_64 rng(seed);
  ShardSnapshot s;
  s.shard_id = 3;
  s.num_shards = 5;
  s.training_config = std::string("cfg\0with nul", 12) + std::to_string(seed);
  for (int i = 0; i < num_chunks; ++i) {
    ChunkSnapshot c;
    c.key = 1000 + 7 * i;
    c.tensor_name = absl::StrCat("layer", i, ".weight");
    c.offset = 4096 * i;
    c.numel = 1 + rng() % 300;
    c.version = rng() % 1000 + 1;
    c.clock = rng() % 1000 + 1;
    c.weights = RandomFloats(c.numel, rng);
    c.optimizer.updates = c.version;
    c.optimizer.first_moment = RandomFloats(c.numel, rng);
    c.optimizer.second_moment = RandomFloats(c.numel, rng);
    c.accumulator = RandomFloats(c.numel, rng);
    c.pending_pushes = 2;
    for (int w = 0; w < 3; ++w) c.workers.push_back({rng(), rng()});
    c.shadow = RandomFloats(c.numel, rng);
    c.live = LiveSet(3);
    if (i % 2 == 1) c.live.Drop(i % 3);
    s.chunks.push_back(std::move(c));
  }
  s.journal_sequence = rng();
  s.revived_by_init = {1};
  return s;
}

// `snapshot` with every worker live and none revived: what formats 1 and 2
// can hold.
ShardSnapshot WithoutLiveSets(ShardSnapshot snapshot) {
  for (ChunkSnapshot& chunk : snapshot.chunks) chunk.live = LiveSet(3);
  snapshot.revived_by_init.clear();
  return snapshot;
}

void ExpectSnapshotsEqual(const ShardSnapshot& a, const ShardSnapshot& b) {
  EXPECT_EQ(a.shard_id, b.shard_id);
  EXPECT_EQ(a.num_shards, b.num_shards);
  EXPECT_EQ(a.training_config, b.training_config);
  EXPECT_EQ(a.journal_sequence, b.journal_sequence);
  EXPECT_EQ(a.revived_by_init, b.revived_by_init);
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("chunk ", i));
    const ChunkSnapshot& x = a.chunks[i];
    const ChunkSnapshot& y = b.chunks[i];
    EXPECT_EQ(x.key, y.key);
    EXPECT_EQ(x.tensor_name, y.tensor_name);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.numel, y.numel);
    EXPECT_EQ(x.version, y.version);
    EXPECT_EQ(x.clock, y.clock);
    EXPECT_EQ(x.weights, y.weights);
    EXPECT_EQ(x.optimizer.updates, y.optimizer.updates);
    EXPECT_EQ(x.optimizer.first_moment, y.optimizer.first_moment);
    EXPECT_EQ(x.optimizer.second_moment, y.optimizer.second_moment);
    EXPECT_EQ(x.accumulator, y.accumulator);
    EXPECT_EQ(x.pending_pushes, y.pending_pushes);
    EXPECT_EQ(x.workers, y.workers);
    EXPECT_EQ(x.shadow, y.shadow);
    EXPECT_EQ(x.live.num_workers(), y.live.num_workers());
    EXPECT_EQ(x.live.Dropped(), y.live.Dropped());
  }
}

// Bitwise CRC-32 (reflected, polynomial 0xEDB88320): an implementation
// independent of the one under test, to forge files with valid checksums.
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

void RewriteChecksum(std::string* image) {
  const uint32_t crc = ReferenceCrc32(*image, image->size() - 4);
  std::memcpy(&(*image)[image->size() - 4], &crc, 4);
}

// Overwrites the little-endian u64 at `offset` and fixes the checksum.
std::string PatchU64(std::string image, size_t offset, uint64_t value) {
  std::memcpy(&image[offset], &value, 8);
  RewriteChecksum(&image);
  return image;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "checkpoint_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string PathOf(uint64_t sequence) const {
    return dir_ + "/" + CheckpointFileName(sequence);
  }
  std::set<std::string> FilesInDir() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  std::string root_;
  std::string dir_;
};

TEST(CheckpointFormatTest, FileNameIsZeroPadded) {
  EXPECT_EQ(CheckpointFileName(42), "checkpoint-000000000042.gwck");
  EXPECT_EQ(CheckpointFileName(1234567890123), "checkpoint-1234567890123.gwck");
}

TEST(CheckpointFormatTest, RoundTripsEveryField) {
  const ShardSnapshot snapshot = MakeSnapshot(1);
  const std::string image = SerializeSnapshot(snapshot);
  EXPECT_EQ(image.substr(0, 8), "GWCKPT01");
  absl::StatusOr<ShardSnapshot> parsed = ParseSnapshot(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSnapshotsEqual(*parsed, snapshot);
  EXPECT_EQ(SerializeSnapshot(*parsed), image);
}

TEST(CheckpointFormatTest, RoundTripsEmptySnapshotAndEmptyVectors) {
  ShardSnapshot snapshot;
  snapshot.chunks.emplace_back();  // a chunk with nothing in it
  snapshot.journal_sequence = 0;
  absl::StatusOr<ShardSnapshot> parsed =
      ParseSnapshot(SerializeSnapshot(snapshot));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSnapshotsEqual(*parsed, snapshot);
  ASSERT_TRUE(ParseSnapshot(SerializeSnapshot(ShardSnapshot())).ok());
}

TEST(CheckpointFormatTest, EveryTruncationIsRejected) {
  const std::string image = SerializeSnapshot(MakeSnapshot(2, 2));
  for (size_t size = 0; size < image.size(); ++size) {
    absl::StatusOr<ShardSnapshot> parsed =
        ParseSnapshot(absl::string_view(image).substr(0, size));
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << size;
  }
}

TEST(CheckpointFormatTest, EveryFlippedByteIsDetected) {
  const std::string image = SerializeSnapshot(MakeSnapshot(3, 2));
  for (size_t i = 0; i < image.size(); ++i) {
    std::string corrupt = image;
    corrupt[i] ^= static_cast<char>(1 << (i % 8));
    ASSERT_FALSE(ParseSnapshot(corrupt).ok()) << "byte " << i;
  }
}

TEST(CheckpointFormatTest, TrailingBytesAreRejected) {
  std::string image = SerializeSnapshot(MakeSnapshot(4, 1));
  image.insert(image.size() - 4, "x");
  EXPECT_EQ(ParseSnapshot(image).status().code(), absl::StatusCode::kDataLoss);
  // Even with a consistent header length and checksum.
  image = PatchU64(image, 12, image.size() - 24);
  EXPECT_THAT(ParseSnapshot(image).status().message(),
              HasSubstr("unread bytes"));
}

TEST(CheckpointFormatTest, OtherFormatVersionIsUnimplemented) {
  for (const uint32_t version : {0u, 4u, 0x01000002u}) {
    std::string image = SerializeSnapshot(MakeSnapshot(5, 1));
    std::memcpy(&image[8], &version, 4);
    RewriteChecksum(&image);
    EXPECT_EQ(ParseSnapshot(image).status().code(),
              absl::StatusCode::kUnimplemented)
        << version;
  }
}

// Format version 2: the same payload without the live sets at its end (two
// zero counts in version 3 when every worker is live).
TEST(CheckpointFormatTest, FormatTwoIsReadWithEveryWorkerLive) {
  const ShardSnapshot snapshot = WithoutLiveSets(MakeSnapshot(13));
  std::string image = SerializeSnapshot(snapshot);
  image.erase(image.size() - 4 - 16, 16);
  const uint32_t version = kCheckpointFormatVersionWithoutLiveSets;
  std::memcpy(&image[8], &version, 4);
  image = PatchU64(image, 12, image.size() - 24);
  absl::StatusOr<ShardSnapshot> parsed = ParseSnapshot(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSnapshotsEqual(*parsed, snapshot);
}

TEST(CheckpointFormatTest, LiveSetsOutsideTheSnapshotAreRejected) {
  ShardSnapshot snapshot = WithoutLiveSets(MakeSnapshot(14, 1));
  snapshot.chunks[0].live.Drop(2);
  std::string image = SerializeSnapshot(snapshot);
  // The drop's worker (u32 before the revived count and the CRC) made 7.
  const size_t worker_at = image.size() - 4 - 8 - 4;
  const uint32_t outside = 7;
  std::memcpy(&image[worker_at], &outside, 4);
  RewriteChecksum(&image);
  EXPECT_THAT(ParseSnapshot(image).status().message(),
              HasSubstr("outside the snapshot"));
}

// Format version 1: the same payload without journal_sequence and the live
// sets at its end.
TEST(CheckpointFormatTest, FormatOneIsReadWithoutAJournalSequence) {
  const ShardSnapshot snapshot = WithoutLiveSets(MakeSnapshot(12));
  std::string image = SerializeSnapshot(snapshot);
  image.erase(image.size() - 4 - 24, 24);
  const uint32_t version = kCheckpointFormatVersionWithoutJournal;
  std::memcpy(&image[8], &version, 4);
  image = PatchU64(image, 12, image.size() - 24);
  absl::StatusOr<ShardSnapshot> parsed = ParseSnapshot(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->journal_sequence.has_value());
  ShardSnapshot expected = snapshot;
  expected.journal_sequence.reset();
  ExpectSnapshotsEqual(*parsed, expected);
}

TEST(CheckpointFormatTest, BadMagicIsRejected) {
  std::string image = SerializeSnapshot(MakeSnapshot(6, 1));
  image[0] = 'X';
  RewriteChecksum(&image);
  EXPECT_THAT(ParseSnapshot(image).status().message(), HasSubstr("magic"));
}

// Lengths that claim far more than the file holds, with valid checksums, are
// rejected before anything is allocated for them.
TEST(CheckpointFormatTest, BogusLengthsFailWithoutHugeAllocations) {
  ShardSnapshot snapshot = MakeSnapshot(7, 1);
  const std::string image = SerializeSnapshot(snapshot);
  const size_t config_length = 20 + 4 + 4;
  const size_t chunk_count =
      config_length + 8 + snapshot.training_config.size();
  const size_t name_length = chunk_count + 8 + 8;
  const ChunkSnapshot& chunk = snapshot.chunks[0];
  const size_t weights_length = name_length + 8 + chunk.tensor_name.size() + 32;
  const size_t first_moment_length =
      weights_length + 8 + 4 * chunk.weights.size() + 8;
  const struct {
    size_t offset;
    const char* field;
  } cases[] = {{config_length, "training_config"},
               {chunk_count, "chunks"},
               {name_length, "tensor_name"},
               {weights_length, "weights"},
               {first_moment_length, "optimizer.first_moment"}};
  for (const auto& c : cases) {
    for (uint64_t bogus :
         {uint64_t{1} << 60, ~uint64_t{0}, uint64_t{1} << 62}) {
      SCOPED_TRACE(absl::StrCat(c.field, " = ", bogus));
      absl::StatusOr<ShardSnapshot> parsed =
          ParseSnapshot(PatchU64(image, c.offset, bogus));
      ASSERT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(parsed.status().message(), HasSubstr(c.field));
    }
  }
  // The offsets above are right: the original values are found there.
  uint64_t weights = 0;
  std::memcpy(&weights, &image[weights_length], 8);
  EXPECT_EQ(weights, chunk.weights.size());
}

TEST_F(CheckpointTest, WriteThenLoadRoundTrips) {
  const ShardSnapshot snapshot = MakeSnapshot(10);
  absl::StatusOr<std::string> path = WriteCheckpoint(dir_, snapshot, 7);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, PathOf(7));
  EXPECT_EQ(FilesInDir(), std::set<std::string>{CheckpointFileName(7)});

  absl::StatusOr<ShardSnapshot> read = ReadCheckpointFile(*path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSnapshotsEqual(*read, snapshot);

  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->sequence, 7u);
  EXPECT_EQ(loaded->path, *path);
  ExpectSnapshotsEqual(loaded->snapshot, snapshot);
}

TEST_F(CheckpointTest, CreatesMissingParentDirectories) {
  dir_ = root_ + "/a/b/c";
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(11, 1), 1).ok());
  EXPECT_TRUE(LoadNewestCheckpoint(dir_).ok());
}

TEST_F(CheckpointTest, NewestSequenceIsChosen) {
  // 10^12 sorts before 999999999999 as text; the loader compares numbers.
  const uint64_t sequences[] = {3, 999999999999, 1000000000000, 10};
  for (uint64_t sequence : sequences) {
    ASSERT_TRUE(
        WriteCheckpoint(dir_, MakeSnapshot(sequence, 1), sequence, 10).ok());
  }
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->sequence, 1000000000000u);
  EXPECT_EQ(loaded->path, PathOf(1000000000000));
  ExpectSnapshotsEqual(loaded->snapshot, MakeSnapshot(1000000000000, 1));
}

TEST_F(CheckpointTest, TornNewestFallsBackToPrevious) {
  const ShardSnapshot previous = MakeSnapshot(20, 2);
  ASSERT_TRUE(WriteCheckpoint(dir_, previous, 1).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(21, 2), 2).ok());
  const std::string newest = ReadBytes(PathOf(2));
  std::vector<size_t> sizes = {0, newest.size() - 1};
  for (size_t size = 7; size < newest.size(); size += 7) sizes.push_back(size);

  for (size_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("truncated to ", size, " of ", newest.size()));
    WriteBytes(PathOf(2), newest.substr(0, size));
    testing::internal::CaptureStderr();
    absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
    const std::string log = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ(loaded->sequence, 1u);
    EXPECT_THAT(log, HasSubstr(PathOf(2)));
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  }
  WriteBytes(PathOf(2), newest.substr(0, newest.size() / 2));
  testing::internal::CaptureStderr();
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  ExpectSnapshotsEqual(loaded->snapshot, previous);
}

TEST_F(CheckpointTest, FlippedByteFallsBackAndIsReported) {
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(30, 2), 1).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(31, 2), 2).ok());
  std::string bytes = ReadBytes(PathOf(2));
  bytes[bytes.size() / 2] ^= 0x40;
  WriteBytes(PathOf(2), bytes);

  absl::StatusOr<ShardSnapshot> read = ReadCheckpointFile(PathOf(2));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("checksum"));
  EXPECT_THAT(read.status().message(), HasSubstr(PathOf(2)));

  testing::internal::CaptureStderr();
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->sequence, 1u);
  EXPECT_THAT(log, HasSubstr("checksum"));
}

TEST_F(CheckpointTest, GarbageTempAndForeignFilesAreIgnored) {
  const ShardSnapshot good = MakeSnapshot(40, 1);
  ASSERT_TRUE(WriteCheckpoint(dir_, good, 1).ok());
  const std::string valid_image = SerializeSnapshot(MakeSnapshot(41, 1));
  std::mt19937_64 rng(42);
  std::string garbage(5000, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  WriteBytes(PathOf(5), garbage);
  // Valid images under names that are not complete checkpoints.
  WriteBytes(PathOf(6) + ".tmp", valid_image);
  WriteBytes(dir_ + "/checkpoint-7.gwck", valid_image);
  WriteBytes(dir_ + "/checkpoint-000000000008.gwck.bak", valid_image);
  WriteBytes(dir_ + "/notes.txt", "hello");
  fs::create_directory(PathOf(9));  // a directory with a checkpoint's name

  testing::internal::CaptureStderr();
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->sequence, 1u);
  ExpectSnapshotsEqual(loaded->snapshot, good);
  EXPECT_THAT(log, HasSubstr(PathOf(5)));
  EXPECT_THAT(log, HasSubstr(PathOf(9)));
}

TEST_F(CheckpointTest, NotFoundForMissingEmptyOrAllCorruptDirectory) {
  EXPECT_EQ(LoadNewestCheckpoint(dir_).status().code(),
            absl::StatusCode::kNotFound);
  fs::create_directory(dir_);
  EXPECT_EQ(LoadNewestCheckpoint(dir_).status().code(),
            absl::StatusCode::kNotFound);
  WriteBytes(PathOf(3), "GWCKPT01 but nothing else");
  testing::internal::CaptureStderr();
  EXPECT_EQ(LoadNewestCheckpoint(dir_).status().code(),
            absl::StatusCode::kNotFound);
  testing::internal::GetCapturedStderr();
}

TEST_F(CheckpointTest, RetentionKeepsNewestAndRemovesStaleTempFiles) {
  for (uint64_t sequence = 1; sequence <= 5; ++sequence) {
    ASSERT_TRUE(
        WriteCheckpoint(dir_, MakeSnapshot(sequence, 1), sequence).ok());
  }
  EXPECT_EQ(FilesInDir(), (std::set<std::string>{CheckpointFileName(4),
                                                 CheckpointFileName(5)}));

  WriteBytes(PathOf(99) + ".tmp", "left by a crash");
  WriteBytes(dir_ + "/notes.txt", "not ours");
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(6, 1), 6, 3).ok());
  EXPECT_EQ(FilesInDir(),
            (std::set<std::string>{CheckpointFileName(4), CheckpointFileName(5),
                                   CheckpointFileName(6), "notes.txt"}));

  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(7, 1), 7, 1).ok());
  EXPECT_EQ(FilesInDir(),
            (std::set<std::string>{CheckpointFileName(7), "notes.txt"}));
}

TEST_F(CheckpointTest, RetentionNeverDeletesTheCheckpointJustWritten) {
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(1, 1), 10).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(2, 1), 11).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(3, 1), 5).ok());
  EXPECT_EQ(FilesInDir(), (std::set<std::string>{CheckpointFileName(11),
                                                 CheckpointFileName(5)}));
}

TEST_F(CheckpointTest, SameSequenceIsReplaced) {
  ASSERT_TRUE(WriteCheckpoint(dir_, MakeSnapshot(1, 1), 4).ok());
  const ShardSnapshot second = MakeSnapshot(2, 3);
  ASSERT_TRUE(WriteCheckpoint(dir_, second, 4).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir_);
  ASSERT_TRUE(loaded.ok());
  ExpectSnapshotsEqual(loaded->snapshot, second);
}

TEST_F(CheckpointTest, FailedWriteLeavesNoTempFile) {
  // rename() cannot replace a non-empty directory.
  fs::create_directories(PathOf(9) + "/occupied");
  absl::StatusOr<std::string> path = WriteCheckpoint(dir_, MakeSnapshot(1), 9);
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr(PathOf(9)));
  EXPECT_EQ(FilesInDir(), std::set<std::string>{CheckpointFileName(9)});
}

TEST_F(CheckpointTest, BadArgumentsAndUnusableDirectory) {
  EXPECT_EQ(WriteCheckpoint(dir_, ShardSnapshot(), 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCheckpoint("", ShardSnapshot(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  WriteBytes(dir_, "a file where the directory should be");
  absl::StatusOr<std::string> path = WriteCheckpoint(dir_, ShardSnapshot(), 1);
  EXPECT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr(dir_));
}

TEST_F(CheckpointTest, MissingFileNamesThePath) {
  absl::StatusOr<ShardSnapshot> read = ReadCheckpointFile(PathOf(1));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(PathOf(1)));
}

}  // namespace
}  // namespace gradwire
