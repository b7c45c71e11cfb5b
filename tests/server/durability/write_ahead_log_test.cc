// The write-ahead log: record framing, torn and corrupt tails, group commit
// under concurrent appends, rotation, and replay into a Shard that ends in
// the exact state of the shard that wrote the log.
#include "server/durability/write_ahead_log.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/durability/wal_replay.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using namespace shard_test;  // NOLINT: test helpers

// Records numbered from `first_sequence`.
std::string Segment(const std::vector<std::string>& payloads,
                    uint64_t generation = 3, uint64_t first_sequence = 1) {
  std::string bytes = WalSegmentHeader(generation);
  for (const std::string& payload : payloads) {
    AppendWalRecord(first_sequence++, JournalRecordType::kPush, payload,
                    &bytes);
  }
  return bytes;
}

// Bitwise CRC-32 (zlib's polynomial).
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

// A segment of format version 1: records without sequence numbers, the CRC
// over type and payload.
std::string UnnumberedSegment(const std::vector<std::string>& payloads,
                              uint64_t generation) {
  std::string bytes("GWAL", 4);
  const uint32_t version = kWalFormatVersionUnnumbered;
  bytes.append(reinterpret_cast<const char*>(&version), 4);
  bytes.append(reinterpret_cast<const char*>(&generation), 8);
  for (const std::string& payload : payloads) {
    const uint32_t length = payload.size();
    const char type = static_cast<char>(JournalRecordType::kPush);
    const uint32_t crc = ReferenceCrc32(std::string(1, type) + payload);
    bytes.append(reinterpret_cast<const char*>(&length), 4);
    bytes.append(reinterpret_cast<const char*>(&crc), 4);
    bytes.push_back(type);
    bytes.append(payload);
  }
  return bytes;
}

std::vector<std::string> Payloads(const WalSegment& segment) {
  std::vector<std::string> payloads;
  for (const WalRecord& record : segment.records) {
    payloads.push_back(record.payload);
  }
  return payloads;
}

TEST(WalFormatTest, RecordsRoundTrip) {
  const std::vector<std::string> payloads = {"a", "", std::string(1000, 'x')};
  auto segment = ParseWalSegment(Segment(payloads));
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ(segment->generation, 3u);
  EXPECT_EQ(Payloads(*segment), payloads);
  EXPECT_TRUE(segment->tail_error.empty()) << segment->tail_error;
}

TEST(WalFormatTest, EveryTruncationKeepsTheWholeRecordsBeforeIt) {
  const std::string full = Segment({"first", "second"});
  const size_t first_end = 16 + 17 + 5;
  for (size_t cut = 17; cut < full.size(); ++cut) {
    auto segment = ParseWalSegment(full.substr(0, cut));
    ASSERT_TRUE(segment.ok()) << cut;
    EXPECT_EQ(segment->records.size(), cut >= first_end ? 1u : 0u) << cut;
    EXPECT_EQ(segment->tail_error.empty(), cut == first_end) << cut;
  }
}

TEST(WalFormatTest, AFlippedPayloadByteEndsTheSegmentThere) {
  std::string bytes = Segment({"first", "second", "third"});
  bytes[16 + 17 + 5 + 17 + 2] ^= 0x20;  // inside "second"
  auto segment = ParseWalSegment(bytes);
  ASSERT_TRUE(segment.ok());
  EXPECT_EQ(Payloads(*segment), std::vector<std::string>{"first"});
  EXPECT_NE(segment->tail_error.find("corrupt record"), std::string::npos)
      << segment->tail_error;
}

TEST(WalFormatTest, RecordsCarryTheirSequenceNumbers) {
  auto segment = ParseWalSegment(Segment({"a", "b"}, 3, 41));
  ASSERT_TRUE(segment.ok()) << segment.status();
  ASSERT_EQ(segment->records.size(), 2u);
  EXPECT_EQ(segment->records[0].sequence, 41u);
  EXPECT_EQ(segment->records[1].sequence, 42u);
  // The sequence number is under the checksum.
  std::string bytes = Segment({"a"}, 3, 41);
  bytes[16 + 9] ^= 1;
  segment = ParseWalSegment(bytes);
  ASSERT_TRUE(segment.ok());
  EXPECT_TRUE(segment->records.empty());
  EXPECT_NE(segment->tail_error.find("checksum"), std::string::npos);
}

TEST(WalFormatTest, FormatOneSegmentsAreReadAsUnnumberedRecords) {
  auto segment = ParseWalSegment(UnnumberedSegment({"first", "second"}, 2));
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ(segment->format_version, kWalFormatVersionUnnumbered);
  EXPECT_EQ(Payloads(*segment), (std::vector<std::string>{"first", "second"}));
  EXPECT_TRUE(segment->tail_error.empty()) << segment->tail_error;
  for (const WalRecord& record : segment->records) {
    EXPECT_EQ(record.sequence, 0u);
  }
}

TEST(WalFormatTest, ForeignHeadersAreDataLoss) {
  EXPECT_TRUE(absl::IsDataLoss(ParseWalSegment("GWAX....").status()));
  std::string other_version = Segment({});
  other_version[4] = 9;
  EXPECT_TRUE(absl::IsDataLoss(ParseWalSegment(other_version).status()));
}

class WriteAheadLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "wal_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/shard";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<WriteAheadLog> Open() {
    WriteAheadLogOptions options;
    options.dir = dir_;
    auto wal = WriteAheadLog::Open(options);
    EXPECT_TRUE(wal.ok()) << wal.status();
    return wal.ok() ? *std::move(wal) : nullptr;
  }

  std::vector<WalSegment> Read() const {
    auto segments = ReadWalSegments(dir_);
    EXPECT_TRUE(segments.ok()) << segments.status();
    return segments.ok() ? *std::move(segments) : std::vector<WalSegment>();
  }

  std::string root_;
  std::string dir_;
};

TEST_F(WriteAheadLogTest,
       DurableRecordsAreInTheFileAndAReopenStartsANewSegment) {
  {
    auto wal = Open();
    ASSERT_NE(wal, nullptr);
    EXPECT_EQ(wal->generation(), 1u);
    wal->Append(JournalRecordType::kInit, "init");
    const uint64_t ticket = wal->Append(JournalRecordType::kPush, "push");
    EXPECT_EQ(ticket, 2u);  // The record's sequence number.
    wal->WaitDurable(ticket);
    const std::vector<WalSegment> segments = Read();
    ASSERT_EQ(segments.size(), 1u);
    EXPECT_EQ(Payloads(segments[0]),
              (std::vector<std::string>{"init", "push"}));
    EXPECT_EQ(segments[0].records[0].type, JournalRecordType::kInit);
  }
  auto reopened = Open();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->generation(), 2u);
  EXPECT_EQ(Read().size(), 2u);
}

TEST_F(WriteAheadLogTest, ContinueAfterNumbersTheNextRecords) {
  auto wal = Open();
  ASSERT_NE(wal, nullptr);
  wal->ContinueAfter(70);
  const uint64_t ticket = wal->Append(JournalRecordType::kPush, "push");
  EXPECT_EQ(ticket, 71u);
  wal->WaitDurable(ticket);
  const std::vector<WalSegment> segments = Read();
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_EQ(segments[0].records.size(), 1u);
  EXPECT_EQ(segments[0].records[0].sequence, 71u);
}

TEST_F(WriteAheadLogTest, SequenceNumbersThatGoBackAreDataLoss) {
  fs::create_directories(dir_);
  {
    std::ofstream(dir_ + "/" + WalSegmentFileName(1), std::ios::binary)
        << Segment({"a", "b"}, 1, 5);
    std::ofstream(dir_ + "/" + WalSegmentFileName(2), std::ios::binary)
        << Segment({"c"}, 2, 6);
  }
  Shard shard(Options());
  auto stats = ReplayJournal(dir_, &shard, /*after_sequence=*/10);
  ASSERT_TRUE(absl::IsDataLoss(stats.status())) << stats.status();
  EXPECT_NE(stats.status().message().find("sequence number 6"),
            std::string::npos)
      << stats.status();
}

// A kill while a segment is created leaves at most a temporary file, never
// a segment without its header: the next Open replaces it and every segment
// reads back.
TEST_F(WriteAheadLogTest, AKillDuringCreationLeavesNoHeaderlessSegment) {
  fs::create_directories(dir_);
  const std::string stale = dir_ + "/" + WalSegmentFileName(1) + ".tmp";
  { std::ofstream(stale) << "WA"; }  // a header cut short
  auto wal = Open();
  ASSERT_NE(wal, nullptr);
  EXPECT_EQ(wal->generation(), 1u);
  EXPECT_FALSE(fs::exists(stale));
  wal->WaitDurable(wal->Append(JournalRecordType::kInit, "init"));
  const std::vector<WalSegment> segments = Read();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(Payloads(segments[0]), std::vector<std::string>{"init"});
}

TEST_F(WriteAheadLogTest, ConcurrentAppendsAreAllDurableExactlyOnce) {
  auto wal = Open();
  ASSERT_NE(wal, nullptr);
  constexpr int kThreads = 8;
  constexpr int kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        wal->WaitDurable(wal->Append(JournalRecordType::kPush,
                                     std::to_string(t * kEach + i)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<std::string> seen;
  for (const WalSegment& segment : Read()) {
    for (const std::string& payload : Payloads(segment)) {
      EXPECT_TRUE(seen.insert(payload).second) << payload;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(WriteAheadLogTest, RotateSplitsSegmentsAndOldOnesCanBeRemoved) {
  auto wal = Open();
  ASSERT_NE(wal, nullptr);
  wal->Append(JournalRecordType::kPush, "before");
  EXPECT_GT(wal->segment_bytes(), 0u);
  auto next = wal->Rotate();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 2u);
  EXPECT_EQ(wal->segment_bytes(), 0u);
  wal->WaitDurable(wal->Append(JournalRecordType::kPush, "after"));
  std::vector<WalSegment> segments = Read();
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(Payloads(segments[0]), std::vector<std::string>{"before"});
  EXPECT_EQ(Payloads(segments[1]), std::vector<std::string>{"after"});
  wal->RemoveSegmentsBefore(2);
  segments = Read();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].generation, 2u);
}

// A BSP shard with delta pulls, two workers, `steps` steps; a refused push
// on the way must not reach the log.
void Train(Shard& shard, uint64_t from, uint64_t to) {
  for (uint64_t step = from; step < to; ++step) {
    for (uint32_t worker = 0; worker < 2; ++worker) {
      ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyA, kNumelA)).ok());
      ASSERT_TRUE(Push(shard, DensePush(worker, step, kKeyB, kNumelB)).ok());
    }
    EXPECT_FALSE(Push(shard, DensePush(0, step + 5, kKeyA, kNumelA)).ok());
  }
}

v1::TrainingConfig DeltaConfig() {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  return config;
}

// Makes `wal` the shard's journal and has worker 0 Init it (a logged record).
void InitJournaled(Shard& shard, WriteAheadLog* wal) {
  shard.set_journal(wal);
  v1::InitResponse response;
  ASSERT_TRUE(
      shard.Init(InitRequest(0, DeltaConfig(), DefaultChunks()), &response)
          .ok());
}

TEST_F(WriteAheadLogTest, ReplayRebuildsTheStateOfTheShardThatWroteTheLog) {
  uint64_t digest = 0;
  {
    auto wal = Open();
    ASSERT_NE(wal, nullptr);
    Shard shard(Options());
    ASSERT_NO_FATAL_FAILURE(InitJournaled(shard, wal.get()));
    Train(shard, 0, 6);
    // Half of step 6: pending in the BSP sum.
    ASSERT_TRUE(Push(shard, DensePush(1, 6, kKeyA, kNumelA)).ok());
    digest = shard.StateDigest();
  }  // The process "dies": no checkpoint.
  Shard restarted(Options());
  auto stats = ReplayJournal(dir_, &restarted);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 1u + 6 * 4 + 1);
  EXPECT_EQ(stats->pushes_applied, 6u * 4 + 1);
  EXPECT_EQ(restarted.StateDigest(), digest);
}

TEST_F(WriteAheadLogTest, ReplayOverACheckpointSkipsWhatItHolds) {
  uint64_t digest = 0;
  absl::StatusOr<ShardSnapshot> checkpoint;
  {
    auto wal = Open();
    ASSERT_NE(wal, nullptr);
    Shard shard(Options());
    ASSERT_NO_FATAL_FAILURE(InitJournaled(shard, wal.get()));
    Train(shard, 0, 3);
    checkpoint = shard.Snapshot();
    ASSERT_TRUE(checkpoint.ok());
    Train(shard, 3, 5);
    digest = shard.StateDigest();
  }
  Shard restarted(Options());
  ASSERT_TRUE(restarted.Restore(*std::move(checkpoint)).ok());
  auto stats = ReplayJournal(dir_, &restarted);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->pushes_duplicate, 3u * 4);
  EXPECT_EQ(stats->pushes_applied, 2u * 4);
  EXPECT_EQ(restarted.StateDigest(), digest);
  // Replaying twice (a second crash before any checkpoint) changes nothing.
  ASSERT_TRUE(ReplayJournal(dir_, &restarted).ok());
  EXPECT_EQ(restarted.StateDigest(), digest);
}

TEST_F(WriteAheadLogTest, ReplayRepeatsWorkerDropsAndRejoins) {
  uint64_t digest = 0;
  {
    auto wal = Open();
    ASSERT_NE(wal, nullptr);
    Shard shard(Options());
    ASSERT_NO_FATAL_FAILURE(InitJournaled(shard, wal.get()));
    Train(shard, 0, 2);
    // Worker 1 goes silent during step 2: the step completes without it.
    ASSERT_TRUE(Push(shard, DensePush(0, 2, kKeyA, kNumelA)).ok());
    ASSERT_TRUE(Push(shard, DensePush(0, 2, kKeyB, kNumelB)).ok());
    ASSERT_TRUE(shard.DropWorker(1).ok());
    ASSERT_TRUE(Push(shard, DensePush(0, 3, kKeyA, kNumelA)).ok());
    // It comes back with an Init and resumes at the shards' clock.
    v1::InitResponse response;
    ASSERT_TRUE(
        shard.Init(InitRequest(1, DeltaConfig(), DefaultChunks()), &response)
            .ok());
    EXPECT_TRUE(shard.IsLive(1));
    digest = shard.StateDigest();
  }
  Shard restarted(Options());
  auto stats = ReplayJournal(dir_, &restarted);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->drops, 1u);
  EXPECT_TRUE(restarted.IsLive(1));
  EXPECT_EQ(restarted.StateDigest(), digest);
}

}  // namespace
}  // namespace gradwire
