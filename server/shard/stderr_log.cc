#include "server/shard/stderr_log.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gradwire {

void LogShardEvent(uint32_t shard_id, absl::string_view message) {
  const std::string line =
      absl::StrFormat("%s gradwire-server shard=%d: %s\n",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                       absl::UTCTimeZone()),
                      shard_id, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace gradwire
