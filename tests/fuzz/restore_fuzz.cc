// libFuzzer target for a shard's start-up over a checkpoint directory
// (server/durability/durable_state.h): arbitrary bytes as a checkpoint file
// and as write-ahead log segments, through the real path that reads,
// decodes, validates, restores and replays them, with and without
// discarding unreadable state.
//
// Input: a flags byte, then a 16-bit length and that many bytes (the
// checkpoint image), then another (segment 1), then the rest (segment 2).
// Flags: bit 0 discard unreadable state; bit 1 skips the log's replay
// (--wal=false); bit 2 writes checkpoint-000000000005.gwck, bit 3
// wal-...01.log, bit 4 wal-...02.log, each only when set. The files go to a
// scratch directory, emptied for every input.
//
// Checked for every input, whatever the bytes:
//   - a failure says why, and is never DATA_LOSS when discarding (that
//     state is moved aside and the shard starts fresh);
//   - after a discard the shard is uninitialised and no checkpoint or log
//     file is left in the directory;
//   - a restored shard holds only finite values, and snapshots and
//     restores to the same digest.
// Any violation aborts through __builtin_trap. Run with -close_fd_mask=2:
// the restore logs its events to stderr.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "server/durability/checkpoint_files.h"
#include "server/durability/durable_state.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/shard.h"
#include "tests/fuzz/shard_fuzz_util.h"

namespace gradwire::fuzz {
namespace {

namespace fs = std::filesystem;

// Created once; emptied for every input.
std::string& ScratchDir() {
  static std::string dir;
  return dir;
}

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  Check(out.good());
}

bool AllFinite(const std::vector<float>& values) {
  for (float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

bool AllFinite(const ShardSnapshot& snapshot) {
  for (const ChunkSnapshot& c : snapshot.chunks) {
    if (!(AllFinite(c.weights) && AllFinite(c.optimizer.first_moment) &&
          AllFinite(c.optimizer.second_moment) && AllFinite(c.accumulator) &&
          AllFinite(c.shadow))) {
      return false;
    }
  }
  return true;
}

bool HoldsDurableFiles(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint-", 0) == 0 || name.rfind("wal-", 0) == 0) {
      return true;
    }
  }
  return false;
}

void CheckRestored(const Shard& shard) {
  if (!shard.initialized()) return;
  absl::StatusOr<ShardSnapshot> snapshot = shard.Snapshot();
  Check(snapshot.ok());
  // A checkpoint with a non-finite value is refused, and so is an update
  // that would make one (docs/architecture.md, "Bad input").
  Check(AllFinite(*snapshot));
  Shard again(MakeShardOptions());
  Check(again.Restore(*std::move(snapshot)).ok());
  Check(again.StateDigest() == shard.StateDigest());
}

void RunOne(uint8_t flags, absl::string_view checkpoint,
            absl::string_view segment1, absl::string_view segment2) {
  const std::string& dir = ScratchDir();
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  fs::create_directory(dir);
  if (flags & 4) WriteFile(dir + "/" + CheckpointFileName(5), checkpoint);
  if (flags & 8) WriteFile(dir + "/" + WalSegmentFileName(1), segment1);
  if (flags & 16) WriteFile(dir + "/" + WalSegmentFileName(2), segment2);

  DurableStateOptions options;
  options.dir = dir;
  options.shard_id = kShardId;
  options.discard_unreadable = flags & 1;
  options.replay_log = !(flags & 2);
  std::unique_ptr<Shard> shard;
  absl::StatusOr<RestoredDurableState> restored =
      RestoreOrDiscardDurableState(options, [&]() -> absl::StatusOr<Shard*> {
        shard = std::make_unique<Shard>(MakeShardOptions());
        return shard.get();
      });
  if (Verbose()) {
    std::fprintf(stderr, "flags %d: %s\n", flags,
                 restored.status().ToString().c_str());
  }
  if (!restored.ok()) {
    Check(!restored.status().message().empty());
    Check(!(options.discard_unreadable && absl::IsDataLoss(restored.status())));
    return;
  }
  if (restored->discarded) {
    Check(!shard->initialized());
    Check(!HoldsDurableFiles(dir));
  }
  CheckRestored(*shard);
}

}  // namespace
}  // namespace gradwire::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gradwire::fuzz::SilenceProtobufLogs();
  const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                     : std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR")
                                                        : "/tmp";
  std::string pattern = std::string(base) + "/gradwire-restore-fuzz.XXXXXX";
  gradwire::fuzz::Check(mkdtemp(pattern.data()) != nullptr);
  gradwire::fuzz::ScratchDir() = pattern;
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(gradwire::fuzz::ScratchDir(), ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradwire::fuzz;
  InputReader input(data, size);
  const uint8_t flags = input.Byte();
  const absl::string_view checkpoint = input.Message();
  const absl::string_view segment1 = input.Message();
  const absl::string_view segment2 = input.Rest();
  RunOne(flags, checkpoint, segment1, segment2);
  return 0;
}
