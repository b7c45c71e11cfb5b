// The checks of `gradwire run`'s option values that need no flags, so that
// they can be tested alone: shard addresses, server arguments and the
// nodes of a run across hosts.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_CLI_RUN_ARGUMENTS_H_
#define GRADWIRE_CLI_RUN_ARGUMENTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire::cli {

// "HOST:PORT,HOST:PORT,..." split into its addresses, in order. HOST is a
// name or an IPv4 address, or an IPv6 address in brackets ("[::1]:7000");
// PORT is in [1, 65535]. INVALID_ARGUMENT quoting the first bad address
// (an empty one included) and saying what is wrong.
absl::StatusOr<std::vector<std::string>> ParseShardAddresses(
    absl::string_view text);

// The words of `text` (split on whitespace), each of which must be a
// --flag; INVALID_ARGUMENT quoting the first that is not.
absl::StatusOr<std::vector<std::string>> SplitServerArgs(
    absl::string_view text);

// The nodes of a run across hosts, as torchrun names them.
struct NodeOptions {
  int nnodes = 1;
  int node_rank = 0;
  // Host name or IP address of node 0, as every node reaches it.
  std::string master_addr;
  // The port that the job's rank 0 may use for its own store (MASTER_PORT);
  // node 0's shards listen on the next ones.
  int master_port = 29500;
};

// OK when `nodes` describe a run: nnodes in [1, max_nodes], node_rank in
// [0, nnodes), a master_addr (a host name, IPv4 or [IPv6]) whenever
// nnodes > 1, master_port in [1, 65535 - shards]. INVALID_ARGUMENT naming
// the option and its fix otherwise.
absl::Status CheckNodeOptions(const NodeOptions& nodes, int shards,
                              int max_nodes);

// Where node 0's `shards` shards listen, as every node computes it without
// asking: master_addr:master_port+1 ... master_addr:master_port+shards.
// Requires CheckNodeOptions(nodes, shards, ...) to be OK.
std::vector<std::string> NodeShardAddresses(const NodeOptions& nodes,
                                            int shards);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_RUN_ARGUMENTS_H_
