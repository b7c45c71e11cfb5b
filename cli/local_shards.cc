#include "cli/local_shards.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "client/health_client.h"

namespace gradwire::cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kHealthTimeout = absl::Seconds(2);

}  // namespace

absl::Status LocalShards::Start() {
  for (int i = 0; i < options_.shards; ++i) {
    std::filesystem::remove(run_.ShardPortFile(i));
    std::filesystem::remove(run_.ShardMetricsPortFile(i));
    Member m;
    m.name = absl::StrCat("shard ", i);
    m.log = run_.ShardLog(i);
    absl::StatusOr<std::unique_ptr<ChildProcess>> p =
        ChildProcess::Spawn(ShardCommand(options_, run_, i));
    if (!p.ok()) return p.status();
    m.process = std::move(*p);
    members_.push_back(std::move(m));
  }
  return absl::OkStatus();
}

int LocalShards::MetricsPort(int shard) const {
  return PortFromFile(run_.ShardMetricsPortFile(shard));
}

std::vector<std::string> LocalShards::MetricsTargets() const {
  std::vector<std::string> targets;
  for (size_t i = 0; i < members_.size(); ++i) {
    targets.push_back(
        absl::StrCat("127.0.0.1:", MetricsPort(static_cast<int>(i))));
  }
  return targets;
}

// Waits for shard i: its port file, then SERVING.
absl::Status LocalShards::WaitForShard(size_t i, absl::Time deadline) {
  Member& shard = members_[i];
  absl::Status health = absl::UnavailableError("no port file yet");
  for (;;) {
    if (!shard.process->running()) {
      supervision_.ReportFailure(
          shard, absl::StrCat("exited with code ", *shard.process->exit_code(),
                              " while starting"));
      return absl::UnavailableError("a shard did not start");
    }
    if (const int port = PortFromFile(run_.ShardPortFile(i)); port > 0) {
      addresses_[i] = absl::StrCat("127.0.0.1:", port);
      health =
          CheckHealth(addresses_[i], kHealthTimeout, options_.health_transport);
      if (health.ok()) return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      supervision_.ReportFailure(
          shard, absl::StrCat("did not serve within ",
                              absl::FormatDuration(options_.start_timeout),
                              " (", health.ToString(), ")"));
      return absl::DeadlineExceededError("a shard did not start");
    }
    if (supervision_.Sleep(kPollInterval)) {
      return absl::CancelledError("stop signal");
    }
  }
}

absl::Status LocalShards::WaitUntilServing() {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  addresses_.assign(members_.size(), "");
  for (size_t i = 0; i < members_.size(); ++i) {
    if (absl::Status s = WaitForShard(i, deadline); !s.ok()) return s;
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    // The metrics port file is written before the port file.
    supervision_.Inform(absl::StrFormat(
        "shard %d serving on %s, metrics at %s (log %s)", i, addresses_[i],
        MetricsUrl(MetricsPort(static_cast<int>(i))), members_[i].log));
  }
  return absl::OkStatus();
}

void LocalShards::CheckCleanExits() {
  for (const Member& s : members_) {
    const std::optional<int> code = s.process->exit_code();
    if (code.has_value() && *code != 0) {
      supervision_.ReportFailure(
          s, absl::StrCat("exited with code ", *code, " after SIGTERM"));
    }
  }
}

}  // namespace gradwire::cli
