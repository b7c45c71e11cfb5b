// The shards of a run on this machine (`gradwire local`, `gradwire run`):
// gradwire-server processes on 127.0.0.1 with OS-chosen ports, started with
// ShardCommand (cluster_commands.h), each writing its port and metrics port
// to the run directory, and waited for until they serve.
//
// Thread safety: none; use it from the thread of its Supervision.
#ifndef GRADWIRE_CLI_LOCAL_SHARDS_H_
#define GRADWIRE_CLI_LOCAL_SHARDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/local_cluster.h"
#include "cli/run_directory.h"
#include "cli/supervision.h"

namespace gradwire::cli {

class LocalShards {
 public:
  // Reads options.shards, .workers (each shard's --num-workers), .bin_dir,
  // .transport, .health_transport, .checkpoint_dir, .server_args and
  // .start_timeout. `options`, `run` and `supervision` must outlive this.
  LocalShards(const LocalClusterOptions& options, const RunDirectory& run,
              Supervision& supervision)
      : options_(options), run_(run), supervision_(supervision) {}

  // Starts every shard (removing stale port files first). An error when one
  // cannot be spawned; the ones started so far are members().
  absl::Status Start();

  // Waits until every shard answers SERVING on grpc.health.v1, then informs
  // of each one's address, metrics URL and log. A shard that exits or does
  // not serve within options.start_timeout is reported to the supervision
  // (with its log's tail) and ends the wait with an error; so does a stop
  // signal (CANCELLED, not reported).
  absl::Status WaitUntilServing();

  // After WaitUntilServing: "127.0.0.1:<port>" of each shard, in shard-id
  // order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  // The port of shard i's /metrics; 0 when its port file is not complete.
  int MetricsPort(int shard) const;
  // After WaitUntilServing: "127.0.0.1:<metrics port>" of each shard, in
  // shard-id order, as Prometheus scrapes them (the shards serve /metrics
  // on loopback only).
  std::vector<std::string> MetricsTargets() const;

  // After a run that went well and Stop: reports each shard that did not
  // exit 0 after SIGTERM (its final checkpoint may be missing).
  void CheckCleanExits();

  std::vector<Member>& members() { return members_; }

 private:
  absl::Status WaitForShard(size_t i, absl::Time deadline);

  const LocalClusterOptions& options_;
  const RunDirectory& run_;
  Supervision& supervision_;
  std::vector<Member> members_;
  std::vector<std::string> addresses_;
};

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_LOCAL_SHARDS_H_
