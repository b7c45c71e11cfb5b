// A shard with its write-ahead log and checkpoints in a directory, as the
// server runs one, for the durability tests: open the log, write a
// checkpoint, kill, restart from the directory, and compare states.
#ifndef GRADWIRE_TESTS_SERVER_DURABILITY_DURABLE_SHARD_UTIL_H_
#define GRADWIRE_TESTS_SERVER_DURABILITY_DURABLE_SHARD_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/durability/checkpoint_format.h"
#include "server/durability/checkpointer.h"
#include "server/durability/durable_state.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/shard.h"

namespace gradwire::durable_test {

// A fresh directory under /tmp, removed on destruction.
class TempDirectory {
 public:
  TempDirectory() {
    char pattern[] = "/tmp/gradwire_durable_shard_XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    path_ = pattern;
  }
  ~TempDirectory() { std::filesystem::remove_all(path_); }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::unique_ptr<WriteAheadLog> OpenLog(const std::string& dir,
                                              uint32_t shard_id) {
  WriteAheadLogOptions options;
  options.dir = dir;
  options.shard_id = shard_id;
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> wal =
      WriteAheadLog::Open(options);
  EXPECT_TRUE(wal.ok()) << wal.status();
  return wal.ok() ? *std::move(wal) : nullptr;
}

// A checkpoint as the server writes one: the log rotated, the snapshot,
// the file, the old segments removed.
inline void WriteCheckpointNow(const Shard& shard, const std::string& dir,
                               uint32_t shard_id, WriteAheadLog* wal) {
  CheckpointerOptions options;
  options.dir = dir;
  options.shard_id = shard_id;
  options.wal = wal;
  Checkpointer checkpointer(&shard, options);
  ASSERT_TRUE(checkpointer.StopAndWriteFinal().ok());
}

// A new shard restored from `dir` as the server restores one (null when
// the restore failed, which the test has recorded).
inline std::unique_ptr<Shard> RestartFrom(const std::string& dir,
                                          const ShardOptions& shard_options,
                                          bool expect_checkpoint = true) {
  auto shard = std::make_unique<Shard>(shard_options);
  DurableStateOptions options;
  options.dir = dir;
  options.shard_id = shard_options.shard_id;
  absl::StatusOr<RestoredDurableState> restored =
      RestoreDurableState(options, shard.get());
  EXPECT_TRUE(restored.ok()) << restored.status();
  if (!restored.ok()) return nullptr;
  if (expect_checkpoint) {
    EXPECT_TRUE(restored->checkpoint_restored);
  }
  return shard;
}

// The whole state as checkpoint bytes, without the journal sequence (which
// a shard without a log does not count).
inline std::string StateBytes(const Shard& shard) {
  absl::StatusOr<ShardSnapshot> snapshot = shard.Snapshot();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  if (!snapshot.ok()) return "";
  snapshot->journal_sequence.reset();
  return SerializeSnapshot(*snapshot);
}

// Bit for bit, the live sets and which workers are live included.
inline void ExpectSameState(const Shard& restored, const Shard& reference,
                            uint32_t workers) {
  EXPECT_EQ(restored.StateDigest(), reference.StateDigest());
  EXPECT_TRUE(StateBytes(restored) == StateBytes(reference))
      << "the restored state differs from the uninterrupted one";
  for (uint32_t worker = 0; worker < workers; ++worker) {
    EXPECT_EQ(restored.IsLive(worker), reference.IsLive(worker))
        << "worker " << worker;
  }
}

}  // namespace gradwire::durable_test

#endif  // GRADWIRE_TESTS_SERVER_DURABILITY_DURABLE_SHARD_UTIL_H_
