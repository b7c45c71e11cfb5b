// The server's event log: one human-readable line per event on stderr.
//
// Named for where it goes, to keep it apart from the shard's journal
// (shard_journal.h) and the write-ahead log that implements it
// (server/durability/write_ahead_log.h), which record requests for replay
// and are not meant for people.
//
// Lines look like
//   2024-05-01T12:00:00.123Z gradwire-server shard=3: listening on 0.0.0.0:7000
// Events are rare (start, restore, checkpoint, shutdown); nothing on a
// request's path logs, so a line is built in full and written with one
// fwrite to keep concurrent lines from interleaving.
//
// Thread safety: safe to call from any thread.
#ifndef GRADWIRE_SERVER_SHARD_STDERR_LOG_H_
#define GRADWIRE_SERVER_SHARD_STDERR_LOG_H_

#include <cstdint>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// Writes one line about `message` for shard `shard_id` to stderr.
void LogShardEvent(uint32_t shard_id, absl::string_view message);

// LogShardEvent with an absl::StrFormat message.
template <typename... Args>
void LogShardEventf(uint32_t shard_id, const absl::FormatSpec<Args...>& format,
                    const Args&... args) {
  LogShardEvent(shard_id, absl::StrFormat(format, args...));
}

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_STDERR_LOG_H_
