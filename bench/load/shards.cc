#include "bench/load/shards.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/load/config.h"
#include "client/health_client.h"

namespace gradwire::bench {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr absl::Duration kHealthTimeout = absl::Seconds(2);
constexpr int kLogTailLines = 10;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The port in a port file once it is complete (it is written by rename);
// 0 before.
int PortFromFile(const std::string& path) {
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &port)) {
    return 0;
  }
  return port;
}

// The value in bytes of a "Name:   1234 kB" line of /proc/<pid>/status.
bool StatusField(absl::string_view status, absl::string_view name,
                 uint64_t* bytes) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, ":")) {
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    uint64_t kib = 0;
    if (!absl::ConsumeSuffix(&line, " kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) {
      return false;
    }
    *bytes = kib * 1024;
    return true;
  }
  return false;
}

}  // namespace

absl::Status PrepareCheckpointFolders(const std::string& root,
                                      uint32_t shards) {
  for (uint32_t i = 0; i < shards; ++i) {
    const std::string folder = absl::StrCat(root, "/shard-", i);
    std::error_code error;
    if (std::filesystem::exists(folder, error) &&
        !std::filesystem::is_empty(folder, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-root: ", folder,
          " is not empty; a shard would restore from it and refuse the "
          "run's pushes as duplicates (give a new or empty folder)"));
    }
    std::filesystem::create_directories(folder, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-root: cannot create ", folder, ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardFleet>> ShardFleet::Start(
    const ShardFleetOptions& options) {
  std::unique_ptr<ShardFleet> fleet(new ShardFleet(options));
  for (uint32_t i = 0; i < options.shards; ++i) {
    if (absl::Status s = fleet->Spawn(i); !s.ok()) return s;
  }
  const absl::Time deadline = absl::Now() + options.start_timeout;
  fleet->addresses_.resize(options.shards);
  for (uint32_t i = 0; i < options.shards; ++i) {
    if (absl::Status s = fleet->WaitUntilServing(i, deadline); !s.ok()) {
      return s;
    }
  }
  return fleet;
}

std::string ShardFleet::RunPath(uint32_t shard, const char* suffix) const {
  return absl::StrCat(options_.run_dir, "/shard-", shard, suffix);
}

absl::Status ShardFleet::Spawn(uint32_t shard) {
  SpawnOptions spawn;
  // The benchmark's own flags are explicit, so that GRADWIRE_* variables
  // meant for the benchmark (GRADWIRE_MODE, GRADWIRE_DRY_RUN, ...), which
  // the shards inherit, cannot change them.
  spawn.argv = {
      options_.server_binary,
      "--address=127.0.0.1",
      "--port=0",
      "--port-file=" + RunPath(shard, ".port"),
      absl::StrCat("--shard-id=", shard),
      absl::StrCat("--num-shards=", options_.shards),
      absl::StrCat("--num-workers=", options_.workers),
      absl::StrCat("--mode=", ModeName(options_.mode)),
      absl::StrCat("--staleness=", options_.mode == v1::CONSISTENCY_MODE_SSP
                                       ? options_.staleness
                                       : 0),
      "--metrics-address=127.0.0.1",
      "--metrics-port=0",
      "--dry-run=false"};
  if (!options_.checkpoint_root.empty()) {
    spawn.argv.push_back(absl::StrCat(
        "--checkpoint-dir=", options_.checkpoint_root, "/shard-", shard));
  }
  spawn.argv.insert(spawn.argv.end(), options_.extra_args.begin(),
                    options_.extra_args.end());
  spawn.stdout_path = spawn.stderr_path = RunPath(shard, ".log");
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Spawn(spawn);
  if (!process.ok()) {
    return absl::Status(
        process.status().code(),
        absl::StrCat("cannot start shard ", shard, " (", options_.server_binary,
                     "): ", process.status().message()));
  }
  processes_.push_back(*std::move(process));
  return absl::OkStatus();
}

absl::Status ShardFleet::WaitUntilServing(uint32_t shard, absl::Time deadline) {
  absl::Status health = absl::UnavailableError("no port file yet");
  for (;;) {
    if (!processes_[shard]->running()) {
      return ShardError(shard, absl::StrCat("exited with code ",
                                            *processes_[shard]->exit_code(),
                                            " while starting"));
    }
    if (const int port = PortFromFile(RunPath(shard, ".port")); port > 0) {
      addresses_[shard] = absl::StrCat("127.0.0.1:", port);
      health = CheckHealth(addresses_[shard], kHealthTimeout);
      if (health.ok()) return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return ShardError(
          shard, absl::StrCat("did not serve within ",
                              absl::FormatDuration(options_.start_timeout),
                              " (", health.message(), ")"));
    }
    absl::SleepFor(kPollInterval);
  }
}

absl::Status ShardFleet::ShardError(uint32_t shard,
                                    const std::string& what) const {
  const std::string log = RunPath(shard, ".log");
  const std::string tail = TailOfFile(log, kLogTailLines);
  return absl::UnavailableError(absl::StrCat(
      "shard ", shard, " ", what, "; last lines of ", log, ":\n  | ",
      tail.empty() ? "(empty)"
                   : absl::StrReplaceAll(tail, {{"\n", "\n  | "}})));
}

absl::StatusOr<ProcessMemory> ShardFleet::Memory(uint32_t shard) {
  ChildProcess& process = *processes_.at(shard);
  if (!process.running()) {
    return ShardError(shard,
                      absl::StrCat("exited with code ", *process.exit_code()));
  }
  const std::string path = absl::StrCat("/proc/", process.pid(), "/status");
  const std::string status = ReadFile(path);
  ProcessMemory memory;
  if (!StatusField(status, "VmRSS", &memory.rss) ||
      !StatusField(status, "VmHWM", &memory.peak)) {
    return absl::UnavailableError(
        absl::StrCat("cannot read VmRSS and VmHWM from ", path));
  }
  return memory;
}

absl::Status ShardFleet::Stop(absl::Duration grace) {
  for (auto& process : processes_) process->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  absl::Status result;
  for (uint32_t i = 0; i < processes_.size(); ++i) {
    ChildProcess& process = *processes_[i];
    while (process.running() && absl::Now() < deadline) {
      absl::SleepFor(kPollInterval);
    }
    absl::Status s;
    if (process.running()) {
      process.Signal(SIGKILL);
      process.Wait();
      s = ShardError(
          i, absl::StrCat("did not exit within ", absl::FormatDuration(grace),
                          " of SIGTERM (killed)"));
    } else if (*process.exit_code() != 0) {
      s = ShardError(i, absl::StrCat("exited with code ", *process.exit_code(),
                                     " after SIGTERM"));
    }
    if (result.ok()) result = s;
  }
  return result;
}

}  // namespace gradwire::bench
