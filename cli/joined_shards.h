// `gradwire run` with shards that outlive one run's workers: shards it
// joins (--shard-addresses, or node 0's from another node across hosts),
// which it only waits for, and node 0's shards across hosts, which it
// keeps up until the other nodes are done with them (run_job.h).
//
// Thread safety: call from the thread that owns `supervision`
// (supervision.h); both block, and a stop signal ends either wait at once.
#ifndef GRADWIRE_CLI_JOINED_SHARDS_H_
#define GRADWIRE_CLI_JOINED_SHARDS_H_

#include <vector>

#include "absl/status/status.h"
#include "cli/run_job.h"
#include "cli/supervision.h"

namespace gradwire::cli {

// Asks each shard of options.shard_addresses in turn for its health (over
// options.health_transport, each check within 2 s) until it serves, and
// says so ("shard I at ADDRESS serves"). options.start_timeout is for all
// of them together, as for shards started here.
//
// Returns OK once every one serves; CANCELLED when a stop signal came
// (`supervision` remembers it); DEADLINE_EXCEEDED when one did not serve
// in time, after supervision.Fail named it, its address and its last
// health error, and, across hosts, what to check on node 0.
absl::Status WaitForJoinedShards(const RunJobOptions& options,
                                 Supervision& supervision);

// Node 0 across hosts, once its own workers are done: waits until the
// shards it started, whose /metrics listen on 127.0.0.1 at
// `metrics_ports`, have pushed or pulled no byte for 3 s, so that the
// other nodes can pull their last weights. Ends early at a stop signal, a
// failed scrape, or after 5 minutes. Says that it waits.
void WaitUntilOtherNodesAreDone(const std::vector<int>& metrics_ports,
                                Supervision& supervision);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_JOINED_SHARDS_H_
