#include "cli/run_arguments.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gradwire::cli {
namespace {

// Why `host` is not a host name, IPv4 or bracketed IPv6 address; empty when
// it is one.
std::string HostProblem(absl::string_view host) {
  if (host.empty()) return "no host";
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return "an unclosed [";
    for (char c : host.substr(1, host.size() - 2)) {
      if (!absl::ascii_isxdigit(c) && c != ':' && c != '.') {
        return "not an IPv6 address in []";
      }
    }
    return "";
  }
  for (char c : host) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') {
      return absl::StrCat("'", std::string(1, c), "' in the host");
    }
  }
  return "";
}

// Why `address` is not HOST:PORT; empty when it is.
std::string AddressProblem(absl::string_view address) {
  if (address.empty()) return "an empty address";
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return "no :PORT";
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (std::string problem = HostProblem(host); !problem.empty()) {
    return problem;
  }
  int number = 0;
  if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535 ||
      !absl::ascii_isdigit(port.front())) {
    return absl::StrCat("port '", port, "' is not in [1, 65535]");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseShardAddresses(
    absl::string_view text) {
  std::vector<std::string> addresses;
  for (absl::string_view address : absl::StrSplit(text, ',')) {
    address = absl::StripAsciiWhitespace(address);
    if (std::string problem = AddressProblem(address); !problem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", address, "' is not HOST:PORT (", problem, ")"));
    }
    addresses.emplace_back(address);
  }
  return addresses;
}

absl::StatusOr<std::vector<std::string>> SplitServerArgs(
    absl::string_view text) {
  std::vector<std::string> words =
      absl::StrSplit(text, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
  for (const std::string& word : words) {
    if (!absl::StartsWith(word, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", word, "\" is not a --flag"));
    }
  }
  return words;
}

absl::Status CheckNodeOptions(const NodeOptions& nodes, int shards,
                              int max_nodes) {
  if (nodes.nnodes < 1 || nodes.nnodes > max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes: ", nodes.nnodes, " is outside [1, ", max_nodes, "]"));
  }
  if (nodes.node_rank < 0 || nodes.node_rank >= nodes.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank: ", nodes.node_rank, " is outside [0, ",
                     nodes.nnodes, "): give each of the ", nodes.nnodes,
                     " nodes its own rank from 0 to ", nodes.nnodes - 1));
  }
  if (nodes.nnodes > 1 && nodes.master_addr.empty()) {
    return absl::InvalidArgumentError(
        "--master-addr is required with --nnodes > 1: give every node the "
        "address of node 0 (--master-addr HOST)");
  }
  if (!nodes.master_addr.empty()) {
    if (std::string problem = HostProblem(nodes.master_addr);
        !problem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--master-addr: '", nodes.master_addr,
                       "' is not a host (", problem, ")"));
    }
  }
  const int highest = 65535 - shards;
  if (nodes.master_port < 1 || nodes.master_port > highest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--master-port: ", nodes.master_port, " is outside [1, ", highest,
        "] (the ", shards, " ports above it are the shards')"));
  }
  return absl::OkStatus();
}

std::vector<std::string> NodeShardAddresses(const NodeOptions& nodes,
                                            int shards) {
  std::vector<std::string> addresses;
  for (int i = 1; i <= shards; ++i) {
    addresses.push_back(
        absl::StrCat(nodes.master_addr, ":", nodes.master_port + i));
  }
  return addresses;
}

}  // namespace gradwire::cli
