#include "server/durability/durable_state.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/durability/checkpointer.h"
#include "server/durability/posix_files.h"
#include "server/shard/stderr_log.h"

namespace gradwire {
namespace {

// The names DiscardDurableState moves: what checkpoint_files.h and
// write_ahead_log.h write, their temporary files included.
bool IsDurableStateFile(absl::string_view name) {
  if (absl::StartsWith(name, "checkpoint-")) {
    return absl::EndsWith(name, ".gwck") || absl::EndsWith(name, ".gwck.tmp");
  }
  return absl::StartsWith(name, "wal-") &&
         (absl::EndsWith(name, ".log") || absl::EndsWith(name, ".log.tmp"));
}

// Creates `dir`/discarded-<seconds>[-N], one that did not exist before.
absl::StatusOr<std::string> MakeDiscardFolder(const std::string& dir,
                                              absl::Time now) {
  const std::string base =
      absl::StrCat(dir, "/discarded-", absl::ToUnixSeconds(now));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string folder =
        attempt == 0 ? base : absl::StrCat(base, "-", attempt);
    if (mkdir(folder.c_str(), 0755) == 0) return folder;
    if (errno != EEXIST) return ErrnoStatus("cannot create", folder);
  }
  return absl::AlreadyExistsError(
      absl::StrCat("cannot create ", base, "-N: 1000 of them exist"));
}

}  // namespace

absl::StatusOr<RestoredDurableState> RestoreDurableState(
    const DurableStateOptions& options, Shard* shard) {
  RestoredDurableState restored;
  // The last log record the checkpoint holds: replay applies those after it.
  std::optional<uint64_t> journal_sequence;
  absl::StatusOr<bool> checkpoint = RestoreNewestCheckpoint(
      options.dir, options.shard_id, shard, &journal_sequence);
  if (!checkpoint.ok()) return checkpoint.status();
  restored.checkpoint_restored = *checkpoint;
  if (!options.replay_log) return restored;
  absl::StatusOr<JournalReplayStats> replay =
      ReplayJournal(options.dir, shard, journal_sequence, options.num_workers);
  if (!replay.ok()) return replay.status();
  restored.replay = *replay;
  return restored;
}

absl::StatusOr<DiscardedDurableState> DiscardDurableState(
    const std::string& dir, uint32_t shard_id, absl::Time now) {
  DiscardedDurableState discarded;
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(dir);
  if (absl::IsNotFound(names.status())) return discarded;
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (IsDurableStateFile(name)) discarded.files.push_back(name);
  }
  if (discarded.files.empty()) return discarded;
  std::sort(discarded.files.begin(), discarded.files.end());
  absl::StatusOr<std::string> folder = MakeDiscardFolder(dir, now);
  if (!folder.ok()) return folder.status();
  discarded.folder = *folder;
  for (const std::string& name : discarded.files) {
    const std::string from = absl::StrCat(dir, "/", name);
    const std::string to = absl::StrCat(*folder, "/", name);
    if (rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(absl::StrCat("cannot move ", from, " to"), to);
    }
    LogShardEventf(shard_id, "discarded unreadable state: moved %s to %s", from,
                   to);
  }
  // Both entries must survive a crash: the file is in the folder, and no
  // longer in the directory a restart reads.
  if (absl::Status s = FsyncDirectory(*folder); !s.ok()) return s;
  if (absl::Status s = FsyncDirectory(dir); !s.ok()) return s;
  return discarded;
}

absl::StatusOr<RestoredDurableState> RestoreOrDiscardDurableState(
    const DurableStateOptions& options,
    absl::FunctionRef<absl::StatusOr<Shard*>()> fresh_shard) {
  absl::StatusOr<Shard*> shard = fresh_shard();
  if (!shard.ok()) return shard.status();
  absl::StatusOr<RestoredDurableState> restored =
      RestoreDurableState(options, *shard);
  if (restored.ok() || !absl::IsDataLoss(restored.status()) ||
      !options.discard_unreadable) {
    return restored;
  }
  LogShardEventf(options.shard_id,
                 "durable state in %s is unreadable (%s); "
                 "--discard-unreadable-state: moving it aside and starting "
                 "fresh",
                 options.dir, restored.status().message());
  absl::StatusOr<DiscardedDurableState> discarded =
      DiscardDurableState(options.dir, options.shard_id, absl::Now());
  if (!discarded.ok()) return discarded.status();
  // The first shard may hold part of the discarded state.
  shard = fresh_shard();
  if (!shard.ok()) return shard.status();
  restored = RestoreDurableState(options, *shard);
  if (!restored.ok()) return restored.status();
  restored->discarded = true;
  restored->discarded_state = *std::move(discarded);
  return restored;
}

}  // namespace gradwire
