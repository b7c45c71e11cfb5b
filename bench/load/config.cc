#include "bench/load/config.h"

#include <cmath>
#include <cstring>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/flags/program.h"

ABSL_FLAG(uint32_t, workers, 64,
          "simulated workers: one thread and one gRPC channel per shard each");
ABSL_FLAG(uint32_t, shards, 2, "gradwire-server processes to start");
ABSL_FLAG(uint64_t, params, 262'144,
          "model size in float32 parameters (one tensor), cut into chunks of "
          "--partition-bytes and placed on the shards; with many ASP workers "
          "nearly every pull is dense, so the bytes moved grow with params x "
          "workers x steps");
ABSL_FLAG(uint64_t, partition_bytes, uint64_t{128} << 10,
          "largest chunk in bytes of float32 (a positive multiple of 4)");
ABSL_FLAG(double, density, 0.01,
          "fraction of each chunk a push carries (Top-K with error feedback), "
          "in (0, 1]");
ABSL_FLAG(std::string, value_type, "fp16",
          "precision of pushed values: fp32, fp16 or bf16");
ABSL_FLAG(int, distinct_gradients, 4,
          "gradients each worker compresses before the run and cycles through, "
          "in [1, 64]");
ABSL_FLAG(std::string, mode, "asp", "consistency mode: asp, bsp or ssp");
ABSL_FLAG(uint32_t, staleness, 2, "SSP staleness (with --mode=ssp)");
ABSL_FLAG(std::string, optimizer, "sgd",
          "the shards' optimizer: sgd, adam (the dense rule at every push) "
          "or 1bit-adam (Adam frozen after each chunk's first update)");
ABSL_FLAG(std::string, pull, "delta",
          "pulls: delta (compressed deltas where the shard can give one, as "
          "gradwire-worker asks) or dense (fp32 weights every step)");
ABSL_FLAG(double, pull_ratio, 0,
          "Top-K ratio of pulled deltas (with --pull=delta), in [0, 1]; 0: "
          "--density, as gradwire-worker's default");
ABSL_FLAG(uint64_t, steps, 100,
          "steps per phase; the run has two phases, and the shards' memory is "
          "compared after each");
ABSL_FLAG(double, rpc_timeout_seconds, 60,
          "deadline of every Init, Push and Pull, in seconds (> 0)");
ABSL_FLAG(std::string, server_binary, "",
          "the gradwire-server binary; empty: the one next to this binary");
ABSL_FLAG(std::vector<std::string>, server_arg, {},
          "extra flag for every shard, e.g. --server-arg=--threads=8; repeat "
          "it for more");
ABSL_FLAG(std::vector<std::string>, compare_server_arg, {},
          "run the benchmark twice, without and then with this extra shard "
          "flag (repeatable), and print the ratios of the two runs");
ABSL_FLAG(std::string, checkpoint_root, "",
          "if set, shard i checkpoints into DIR/shard-<i> (with "
          "--compare-server-arg: DIR/baseline/shard-<i> and "
          "DIR/compare/shard-<i>); the folders must be new or empty");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file");
ABSL_FLAG(
    double, max_rss_growth_mib, 8.0,
    "memory verdict: a shard's RSS may grow between the phases by at most "
    "the larger of this many MiB and --max-rss-growth-percent");
ABSL_FLAG(double, max_rss_growth_percent, 25.0,
          "memory verdict: allowed growth as a percentage of the shard's RSS "
          "after the first phase");
ABSL_FLAG(uint64_t, seed, 42, "seed of the gradients");

namespace gradwire::bench {
namespace {

constexpr absl::string_view kFlagNames[] = {"workers",
                                            "shards",
                                            "params",
                                            "partition_bytes",
                                            "density",
                                            "value_type",
                                            "distinct_gradients",
                                            "mode",
                                            "staleness",
                                            "optimizer",
                                            "pull",
                                            "pull_ratio",
                                            "steps",
                                            "rpc_timeout_seconds",
                                            "server_binary",
                                            "server_arg",
                                            "compare_server_arg",
                                            "checkpoint_root",
                                            "json",
                                            "max_rss_growth_mib",
                                            "max_rss_growth_percent",
                                            "seed",
                                            "dry_run"};

// Server flags the benchmark sets itself: giving them through --server-arg
// would break the run (two shards on one port or one checkpoint folder, a
// worker count that disagrees with Init).
constexpr absl::string_view kOwnedServerFlags[] = {
    "address",          "port", "port_file", "shard_id", "num_shards",
    "num_workers",      "mode", "staleness", "dry_run",  "checkpoint_dir",
    "metrics_port_file"};

template <typename T>
absl::Status OutOfRange(absl::string_view flag, const T& value,
                        absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", value, " is not ", expected));
}

absl::Status CheckServerArgs(absl::string_view flag,
                             const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", arg,
                       "' is not a flag (expected --name or --name=value)"));
    }
    const std::string name = absl::StrReplaceAll(
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos
                                                         : arg.find('=') - 2),
        {{"-", "_"}});
    for (absl::string_view owned : kOwnedServerFlags) {
      if (name == owned) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, ": '", arg, "' sets a flag the benchmark sets itself",
            owned == "checkpoint_dir" ? " (use --checkpoint-root)" : ""));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseModel(LoadBenchConfig* c) {
  c->workers = absl::GetFlag(FLAGS_workers);
  if (c->workers < 1 || c->workers > 1024) {
    return OutOfRange("workers", c->workers, "in [1, 1024]");
  }
  c->shards = absl::GetFlag(FLAGS_shards);
  if (c->shards < 1 || c->shards > 16) {
    return OutOfRange("shards", c->shards, "in [1, 16]");
  }
  c->params = absl::GetFlag(FLAGS_params);
  if (c->params < c->shards || c->params > (uint64_t{1} << 30)) {
    return OutOfRange("params", c->params,
                      absl::StrCat("in [--shards (", c->shards, "), 2^30]"));
  }
  c->partition_bytes = absl::GetFlag(FLAGS_partition_bytes);
  if (c->partition_bytes == 0 || c->partition_bytes % 4 != 0 ||
      c->partition_bytes > (uint64_t{1} << 30)) {
    return OutOfRange("partition_bytes", c->partition_bytes,
                      "a positive multiple of 4 up to 1 GiB");
  }
  const uint64_t chunk_numel = c->partition_bytes / 4;
  const uint64_t chunks = (c->params + chunk_numel - 1) / chunk_numel;
  if (chunks < c->shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--params=", c->params, " at --partition-bytes=", c->partition_bytes,
        " makes ", chunks, " chunks, fewer than --shards=", c->shards,
        " (a shard would own nothing); lower --partition-bytes"));
  }
  return absl::OkStatus();
}

absl::Status ParseTraffic(LoadBenchConfig* c) {
  c->density = absl::GetFlag(FLAGS_density);
  if (!(c->density > 0 && c->density <= 1)) {
    return OutOfRange("density", c->density, "in (0, 1]");
  }
  const std::string value_type = absl::GetFlag(FLAGS_value_type);
  const auto precision = ParsePrecision(absl::AsciiStrToLower(value_type));
  if (!precision) {
    return OutOfRange("value_type", value_type, "fp32, fp16 or bf16");
  }
  c->push_precision = *precision;
  c->distinct_gradients = absl::GetFlag(FLAGS_distinct_gradients);
  if (c->distinct_gradients < 1 || c->distinct_gradients > 64) {
    return OutOfRange("distinct_gradients", c->distinct_gradients,
                      "in [1, 64]");
  }
  const std::string pull = absl::AsciiStrToLower(absl::GetFlag(FLAGS_pull));
  if (pull != "delta" && pull != "dense") {
    return OutOfRange("pull", absl::GetFlag(FLAGS_pull), "delta or dense");
  }
  c->delta_pulls = pull == "delta";
  c->pull_ratio = absl::GetFlag(FLAGS_pull_ratio);
  if (!(c->pull_ratio >= 0 && c->pull_ratio <= 1)) {
    return OutOfRange("pull_ratio", c->pull_ratio, "in [0, 1]");
  }
  return absl::OkStatus();
}

absl::Status ParseSchedule(LoadBenchConfig* c) {
  const std::string mode = absl::AsciiStrToLower(absl::GetFlag(FLAGS_mode));
  if (mode == "asp") {
    c->mode = v1::CONSISTENCY_MODE_ASP;
  } else if (mode == "bsp") {
    c->mode = v1::CONSISTENCY_MODE_BSP;
  } else if (mode == "ssp") {
    c->mode = v1::CONSISTENCY_MODE_SSP;
  } else {
    return OutOfRange("mode", absl::GetFlag(FLAGS_mode), "asp, bsp or ssp");
  }
  c->optimizer = absl::AsciiStrToLower(absl::GetFlag(FLAGS_optimizer));
  if (c->optimizer != "sgd" && c->optimizer != "adam" &&
      c->optimizer != "1bit-adam") {
    return OutOfRange("optimizer", absl::GetFlag(FLAGS_optimizer),
                      "sgd, adam or 1bit-adam");
  }
  c->staleness = absl::GetFlag(FLAGS_staleness);
  if (c->staleness > 1000) {
    return OutOfRange("staleness", c->staleness, "in [0, 1000]");
  }
  c->steps = absl::GetFlag(FLAGS_steps);
  if (c->steps < 1 || c->steps > 1'000'000) {
    return OutOfRange("steps", c->steps, "in [1, 1000000]");
  }
  const double timeout = absl::GetFlag(FLAGS_rpc_timeout_seconds);
  if (!(timeout > 0 && timeout <= 3600)) {
    return OutOfRange("rpc_timeout_seconds", timeout, "in (0, 3600]");
  }
  c->rpc_timeout = absl::Seconds(timeout);
  return absl::OkStatus();
}

absl::Status ParseRun(const RepeatedServerArgs& repeated, LoadBenchConfig* c) {
  c->server_binary = absl::GetFlag(FLAGS_server_binary);
  c->server_args = repeated.server_args.empty()
                       ? absl::GetFlag(FLAGS_server_arg)
                       : repeated.server_args;
  c->compare_server_args = repeated.compare_server_args.empty()
                               ? absl::GetFlag(FLAGS_compare_server_arg)
                               : repeated.compare_server_args;
  if (absl::Status s = CheckServerArgs("server-arg", c->server_args); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckServerArgs("compare-server-arg", c->compare_server_args);
      !s.ok()) {
    return s;
  }
  c->checkpoint_root = absl::GetFlag(FLAGS_checkpoint_root);
  c->json_path = absl::GetFlag(FLAGS_json);
  c->max_rss_growth_mib = absl::GetFlag(FLAGS_max_rss_growth_mib);
  if (!(c->max_rss_growth_mib >= 0 && std::isfinite(c->max_rss_growth_mib))) {
    return OutOfRange("max_rss_growth_mib", c->max_rss_growth_mib,
                      "a finite number >= 0");
  }
  c->max_rss_growth_percent = absl::GetFlag(FLAGS_max_rss_growth_percent);
  if (!(c->max_rss_growth_percent >= 0 &&
        std::isfinite(c->max_rss_growth_percent))) {
    return OutOfRange("max_rss_growth_percent", c->max_rss_growth_percent,
                      "a finite number >= 0");
  }
  c->seed = absl::GetFlag(FLAGS_seed);
  c->dry_run = DryRunRequested();
  return absl::OkStatus();
}

// The value of a repeatable flag at argv[*i] named `name` ("--name=value"
// or "--name value", advancing *i past a separate value); false if argv[*i]
// is another argument.
absl::StatusOr<bool> TakeRepeated(absl::string_view name, int argc, char** argv,
                                  int* i, std::string* value) {
  const absl::string_view arg = argv[*i];
  for (absl::string_view prefix : {"--", "-"}) {
    const std::string flag = absl::StrCat(prefix, name);
    if (arg == flag) {
      if (*i + 1 >= argc) {
        const std::string shown = absl::StrReplaceAll(flag, {{"_", "-"}});
        return absl::InvalidArgumentError(
            absl::StrCat(shown, " needs a value (", shown, "=--flag=value)"));
      }
      *value = argv[++*i];
      return true;
    }
    if (absl::StartsWith(arg, absl::StrCat(flag, "="))) {
      *value = std::string(arg.substr(flag.size() + 1));
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Span<const absl::string_view> LoadBenchFlagNames() { return kFlagNames; }

absl::StatusOr<RepeatedServerArgs> ExtractRepeatedServerArgs(int* argc,
                                                             char** argv) {
  RepeatedServerArgs out;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      while (i < *argc) argv[kept++] = argv[i++];
      break;
    }
    std::string value;
    absl::StatusOr<bool> taken =
        TakeRepeated("server_arg", *argc, argv, &i, &value);
    if (taken.ok() && *taken) {
      out.server_args.push_back(value);
      continue;
    }
    if (taken.ok()) {
      taken = TakeRepeated("compare_server_arg", *argc, argv, &i, &value);
      if (taken.ok() && *taken) {
        out.compare_server_args.push_back(value);
        continue;
      }
    }
    if (!taken.ok()) return taken.status();
    argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;
  return out;
}

absl::StatusOr<LoadBenchConfig> LoadBenchConfigFromFlags(
    const RepeatedServerArgs& repeated) {
  LoadBenchConfig config;
  absl::Status s = ParseModel(&config);
  if (s.ok()) s = ParseTraffic(&config);
  if (s.ok()) s = ParseSchedule(&config);
  if (s.ok()) s = ParseRun(repeated, &config);
  if (!s.ok()) return s;
  return config;
}

absl::string_view ModeName(v1::ConsistencyMode mode) {
  switch (mode) {
    case v1::CONSISTENCY_MODE_BSP:
      return "bsp";
    case v1::CONSISTENCY_MODE_SSP:
      return "ssp";
    default:
      return "asp";
  }
}

}  // namespace gradwire::bench
