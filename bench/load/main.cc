// gradwire-bench-load: many simulated workers against real shards.
//
//   gradwire-bench-load [--workers=64] [--shards=2] [--params=262144]
//                       [--mode=asp|bsp|ssp] [--pull=delta|dense]
//                       [--steps=100] [--server-arg=--flag=value ...]
//                       [--compare-server-arg=--flag=value ...]
//                       [--checkpoint-root=DIR] [--json=FILE]
//
// Starts --shards gradwire-server processes, Inits them for --workers
// workers, and runs the workers as threads that push Top-K gradients and
// pull every step (workers.h). It reports Push and Pull throughput and
// latency, errors, bytes, and the shards' memory after --steps and after
// 2 x --steps steps: resident memory must not grow with the number of
// steps. With --compare-server-arg the whole benchmark runs twice, without
// and with those shard flags, and the ratios of the two are printed.
//
// Exit codes: 0 when every RPC succeeded and no shard's memory grew beyond
// its limit; 1 otherwise (or when the run could not take place); 2 for a
// bad command line.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/config.h"
#include "bench/load/report.h"
#include "bench/load/run.h"
#include "bench/load/shards.h"
#include "bench/load/workload.h"
#include "common/flags/command_line.h"
#include "common/flags/program.h"
#include "common/lock_checks.h"
#include "common/process/child_process.h"

namespace gradwire::bench {
namespace {

constexpr absl::string_view kUsage =
    "gradwire-bench-load: simulated workers (threads, one connection per "
    "shard each)\nagainst real gradwire-server processes. Every step each "
    "worker pushes a Top-K\ngradient and pulls to and from every shard; "
    "reports throughput, p50/p99/max\nlatency, errors, bytes, and the shards' "
    "RSS after --steps and 2 x --steps\nsteps (memory must not grow with the "
    "steps). Exit 0 only without errors\nand with every shard's RSS growth "
    "within its limit.";

int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "gradwire-bench-load: %s (see --help)\n",
               std::string(status.message()).c_str());
  return kUsageExitCode;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gradwire-bench-load: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

absl::Status ResolveServerBinary(LoadBenchConfig* config) {
  if (config->server_binary.empty()) {
    absl::StatusOr<std::string> dir = SelfDirectory();
    if (!dir.ok()) return dir.status();
    config->server_binary = *dir + "/gradwire-server";
  }
  if (access(config->server_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server-binary: '", config->server_binary,
                     "' is not an executable file"));
  }
  return absl::OkStatus();
}

// The runs: one, or a baseline and a compared run, each with folders of
// its own under --checkpoint-root.
std::vector<RunSpec> PlanRuns(const LoadBenchConfig& config,
                              const std::string& run_dir) {
  const bool compare = !config.compare_server_args.empty();
  std::vector<RunSpec> runs;
  for (const char* name : {"baseline", "compare"}) {
    RunSpec spec;
    spec.name = compare ? name : "run";
    spec.server_args = config.server_args;
    if (spec.name == "compare") {
      spec.server_args.insert(spec.server_args.end(),
                              config.compare_server_args.begin(),
                              config.compare_server_args.end());
    }
    if (!config.checkpoint_root.empty()) {
      spec.checkpoint_root =
          compare ? absl::StrCat(config.checkpoint_root, "/", name)
                  : config.checkpoint_root;
    }
    spec.run_dir = absl::StrCat(run_dir, "/", spec.name);
    spec.server_binary = config.server_binary;
    runs.push_back(std::move(spec));
    if (!compare) break;
  }
  return runs;
}

absl::StatusOr<std::string> MakeRunDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                   "/gradwire-bench-load-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", pattern));
  }
  return pattern;
}

int Main(LoadBenchConfig& config) {
  const absl::Time build_start = absl::Now();
  absl::StatusOr<LoadModel> model = BuildLoadModel(config);
  if (!model.ok()) return UsageError(model.status());
  absl::StatusOr<std::vector<WorkerPushes>> pushes =
      BuildAllPushes(config, *model->partition);
  if (!pushes.ok()) return Fail(pushes.status());
  std::printf(
      "%u workers, %u shards, %llu parameters in %llu chunks, %s, %s, pulls "
      "%s, pushes topk %g %s; %llu + %llu steps; pushes built in %.1f s\n",
      config.workers, config.shards,
      static_cast<unsigned long long>(config.params),
      static_cast<unsigned long long>(model->partition->num_chunks()),
      std::string(ModeName(config.mode)).c_str(), config.optimizer.c_str(),
      config.delta_pulls ? "delta" : "dense", config.density,
      std::string(PrecisionName(config.push_precision)).c_str(),
      static_cast<unsigned long long>(config.steps),
      static_cast<unsigned long long>(config.steps),
      absl::ToDoubleSeconds(absl::Now() - build_start));
  absl::StatusOr<std::string> run_dir = MakeRunDir();
  if (!run_dir.ok()) return Fail(run_dir.status());
  std::vector<RunReport> reports;
  bool ok = true;
  for (const RunSpec& spec : PlanRuns(config, *run_dir)) {
    std::filesystem::create_directories(spec.run_dir);
    if (!spec.checkpoint_root.empty()) {
      if (absl::Status s =
              PrepareCheckpointFolders(spec.checkpoint_root, config.shards);
          !s.ok()) {
        return Fail(s);
      }
    }
    absl::StatusOr<RunReport> report = RunLoad(config, spec, *model, &*pushes);
    if (!report.ok()) {
      return Fail(absl::Status(report.status().code(),
                               absl::StrCat(report.status().message(),
                                            "\n(logs in ", *run_dir, ")")));
    }
    PrintRun(*report, stdout);
    ok = ok && report->errors == 0 && report->memory_ok;
    reports.push_back(*std::move(report));
  }
  if (reports.size() == 2) {
    PrintComparison(CompareRuns(reports[0], reports[1]), stdout);
  }
  if (!config.json_path.empty()) {
    absl::Status s = WriteLoadJson(config.json_path, config,
                                   model->partition->num_chunks(), reports);
    if (!s.ok()) return Fail(s);
    std::printf("wrote %s\n", config.json_path.c_str());
  }
  if (ok) {
    std::filesystem::remove_all(*run_dir);
  } else {
    std::printf("FAILED: errors or memory growth above; shard logs in %s\n",
                run_dir->c_str());
  }
  return ok ? 0 : 1;
}

// Parses and validates the command line; exits on --help, --dry-run and
// usage errors.
LoadBenchConfig ParseCommandLineOrExit(int argc, char** argv) {
  const ProgramFlags program = {"gradwire-bench-load", kUsage,
                                LoadBenchFlagNames()};
  // The repeatable flags first, which Abseil cannot hold; they are matched
  // by their Abseil names.
  NormalizeFlagNames(argc, argv);
  absl::StatusOr<RepeatedServerArgs> repeated =
      ExtractRepeatedServerArgs(&argc, argv);
  if (!repeated.ok()) ExitWithUsageError(program, repeated.status());
  ParseFlagsOrExit(program, argc, argv);
  absl::StatusOr<LoadBenchConfig> config = LoadBenchConfigFromFlags(*repeated);
  absl::Status s = config.status();
  if (s.ok()) s = ResolveServerBinary(&*config);
  if (!s.ok()) std::exit(UsageError(s));
  if (config->dry_run) {
    // The repeatable flags are printed one occurrence per line below.
    std::vector<absl::string_view> single;
    for (absl::string_view name : LoadBenchFlagNames()) {
      if (name != "server_arg" && name != "compare_server_arg") {
        single.push_back(name);
      }
    }
    std::fputs(FlagValues(single).c_str(), stdout);
    for (const std::string& arg : config->server_args) {
      std::printf("--server-arg=%s\n", arg.c_str());
    }
    for (const std::string& arg : config->compare_server_args) {
      std::printf("--compare-server-arg=%s\n", arg.c_str());
    }
    std::printf("server binary: %s\n", config->server_binary.c_str());
    std::exit(0);
  }
  return *std::move(config);
}

}  // namespace
}  // namespace gradwire::bench

int main(int argc, char** argv) {
  gradwire::DisableMutexDeadlockDetection();
  gradwire::bench::LoadBenchConfig config =
      gradwire::bench::ParseCommandLineOrExit(argc, argv);
  return gradwire::bench::Main(config);
}
