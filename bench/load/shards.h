// The real gradwire-server processes of one gradwire-bench-load run.
//
// ShardFleet::Start runs `shards` servers on 127.0.0.1 with --port=0 and a
// port file each (the OS picks the ports), waits until every one answers
// the gRPC health check, and from then on reads their memory from
// /proc/<pid>/status. The children are ChildProcess: their own process
// group and PR_SET_PDEATHSIG, so they die with the benchmark; the destructor
// SIGKILLs and reaps whatever still runs.
//
// Thread safety: none; use a fleet from the thread that started it
// (PR_SET_PDEATHSIG is tied to that thread).
#ifndef GRADWIRE_BENCH_LOAD_SHARDS_H_
#define GRADWIRE_BENCH_LOAD_SHARDS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

struct ShardFleetOptions {
  std::string server_binary;
  uint32_t shards = 2;
  uint32_t workers = 1;
  v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_ASP;
  uint32_t staleness = 0;
  // Appended after the benchmark's own flags, to every shard.
  std::vector<std::string> extra_args;
  // When set, shard i gets --checkpoint-dir=<checkpoint_root>/shard-<i>.
  std::string checkpoint_root;
  // An existing folder for the port files and the shards' logs.
  std::string run_dir;
  absl::Duration start_timeout = absl::Seconds(30);
};

// Resident memory of a process, in bytes, from /proc/<pid>/status.
struct ProcessMemory {
  uint64_t rss = 0;   // VmRSS: now.
  uint64_t peak = 0;  // VmHWM: the largest RSS so far.
};

// FAILED_PRECONDITION naming the folder when <root>/shard-<i> exists and is
// not empty for some i < shards (a shard would restore from it and refuse
// the run's pushes as duplicates); creates the folders otherwise.
absl::Status PrepareCheckpointFolders(const std::string& root, uint32_t shards);

class ShardFleet {
 public:
  // Starts the shards and waits until all serve. On failure the message
  // names the shard and ends with the last lines of its log.
  static absl::StatusOr<std::unique_ptr<ShardFleet>> Start(
      const ShardFleetOptions& options);

  ~ShardFleet() = default;
  ShardFleet(const ShardFleet&) = delete;
  ShardFleet& operator=(const ShardFleet&) = delete;

  // "127.0.0.1:<port>", by shard id.
  const std::vector<std::string>& addresses() const { return addresses_; }

  // The memory of shard `shard`; UNAVAILABLE when it has exited.
  absl::StatusOr<ProcessMemory> Memory(uint32_t shard);

  // SIGTERM to every shard, then waits up to `grace` for each to exit.
  // An exit code other than 0, or a shard still running at the deadline
  // (then killed), is an error naming it with its log's last lines.
  absl::Status Stop(absl::Duration grace);

 private:
  explicit ShardFleet(ShardFleetOptions options)
      : options_(std::move(options)) {}

  std::string RunPath(uint32_t shard, const char* suffix) const;
  absl::Status Spawn(uint32_t shard);
  absl::Status WaitUntilServing(uint32_t shard, absl::Time deadline);
  absl::Status ShardError(uint32_t shard, const std::string& what) const;

  const ShardFleetOptions options_;
  std::vector<std::unique_ptr<ChildProcess>> processes_;
  std::vector<std::string> addresses_;
};

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_LOAD_SHARDS_H_
