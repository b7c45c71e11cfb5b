#include "worker/worker_flags.h"

#include <unistd.h>

#include <cmath>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/compress/registry.h"
#include "common/precision.h"
#include "common/tls/transport_security.h"
#include "worker/progress.h"

ABSL_FLAG(std::string, shards, "127.0.0.1:7000",
          "Comma-separated shard addresses (host:port), in shard-id order.");
ABSL_FLAG(int64_t, worker_id, 0,
          "This node's worker id, in [0, --num-workers).");
ABSL_FLAG(int64_t, num_workers, 1, "Number of worker nodes.");
ABSL_FLAG(int64_t, local_rank, 0, "This process's rank inside its node.");
ABSL_FLAG(int64_t, local_size, 1,
          "Processes on this node; > 1 reduces gradients inside the node "
          "(Gloo) before pushing.");
ABSL_FLAG(std::string, local_store, "127.0.0.1:29500",
          "host:port of the node's c10d TCPStore (hosted by local rank 0).");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "Directory holding the Fashion-MNIST .gz IDX files.");
ABSL_FLAG(std::string, model, "cnn", "Model: mlp or cnn.");
ABSL_FLAG(int64_t, epochs, 1, "Epochs to train.");
ABSL_FLAG(int64_t, batch_size, 64, "Examples per step on each worker.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0: no limit).");
ABSL_FLAG(int64_t, train_limit, 0,
          "Use only the first N training examples (0: all).");
ABSL_FLAG(int64_t, test_limit, 0,
          "Use only the first N test examples (0: all).");
ABSL_FLAG(int64_t, seed, 1, "Seed of model initialisation and batch order.");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0",
          "Numeric IPv4 address of the Prometheus endpoint (/metrics).");
ABSL_FLAG(int64_t, metrics_port, 0,
          "TCP port of the Prometheus endpoint; 0 lets the OS pick one "
          "(logged, and written to --metrics-port-file); -1 turns it off.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, the metrics port is written to this file (atomically) "
          "once bound.");
ABSL_FLAG(double, metrics_linger_seconds, 0,
          "After training, keep /metrics up this long so that Prometheus "
          "scrapes the final counts (a scrape interval or two).");
ABSL_FLAG(bool, dry_run, false,
          "Check the flags, print the settings they resolve to, and exit "
          "without connecting (exit 0; 2 for a bad flag).");
ABSL_FLAG(bool, evaluate, true,
          "Measure test accuracy after every epoch (in BSP all workers hold "
          "the same weights; gradwire local evaluates on worker 0 only).");
ABSL_FLAG(std::string, compressor, "topk",
          "Gradient compressor: none, fp16, bf16, topk, randomk, threshold, "
          "dgc, qsgd, onebit.");
ABSL_FLAG(double, ratio, 0.01, "Fraction of elements sparsifiers keep.");
ABSL_FLAG(double, threshold, 0.001, "threshold compressor: |g| to keep.");
ABSL_FLAG(int64_t, levels, 256, "qsgd: quantisation levels.");
ABSL_FLAG(std::string, value_type, "fp16",
          "Precision of pushed values: fp32, fp16 or bf16.");
ABSL_FLAG(bool, error_feedback, true,
          "Keep what compression left out for later steps.");
ABSL_FLAG(double, dgc_momentum, 0.0,
          "dgc: momentum correction factor (0: off).");
ABSL_FLAG(bool, dgc_momentum_masking, true, "dgc: momentum-factor masking.");
ABSL_FLAG(double, dgc_clip_norm, 0.0,
          "dgc: local gradient clipping norm (0: off).");
ABSL_FLAG(int64_t, dgc_warmup_epochs, 0, "dgc: epochs of sparsity warm-up.");
ABSL_FLAG(std::string, pull, "delta",
          "Pulls: dense (full weights every step) or delta (compressed "
          "weight deltas with server-side error feedback).");
ABSL_FLAG(double, pull_ratio, 0.05, "Fraction of elements a delta pull keeps.");
ABSL_FLAG(std::string, optimizer, "momentum",
          "Server optimizer: sgd, momentum, nesterov, adam, adamw.");
ABSL_FLAG(double, lr, 0.05, "Learning rate.");
ABSL_FLAG(double, momentum, 0.9, "Momentum (beta1 for adam).");
ABSL_FLAG(double, weight_decay, 0.0, "Weight decay.");
ABSL_FLAG(std::string, mode, "bsp", "Consistency mode: bsp, asp or ssp.");
ABSL_FLAG(int64_t, staleness, 2, "SSP staleness.");
ABSL_FLAG(int64_t, partition_bytes, 4 << 20, "Largest chunk in bytes.");
ABSL_FLAG(double, rpc_timeout_seconds, 30, "Deadline of each Init and Push.");
ABSL_FLAG(std::string, tls_cert, "", gradwire::kClientTlsCertHelp);
ABSL_FLAG(std::string, tls_key, "", gradwire::kClientTlsKeyHelp);
ABSL_FLAG(std::string, tls_ca, "", gradwire::kClientTlsCaHelp);
ABSL_FLAG(std::string, tls_server_name, "", gradwire::kClientTlsServerNameHelp);
ABSL_FLAG(std::string, auth_token_file, "", gradwire::kClientAuthTokenFileHelp);
ABSL_FLAG(std::string, progress, "auto",
          "Progress display: auto (bar on a terminal, lines otherwise), bar, "
          "log or none.");
ABSL_FLAG(int64_t, step_delay_ms, 0,
          "Fault injection for tests and benchmarks: sleep this many "
          "milliseconds before pushing a step, to make this worker a "
          "straggler (0: off).");
ABSL_FLAG(int64_t, step_delay_every, 1,
          "With --step-delay-ms: sleep only before every N-th step (1: every "
          "step), an intermittent straggler.");
ABSL_FLAG(std::string, summary_json, "",
          "Write the run's summary to this file.");

namespace gradwire {
namespace {

template <typename... Args>
absl::Status Bad(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

absl::Status ReadOptimizer(v1::OptimizerConfig* optimizer) {
  const std::string name = absl::GetFlag(FLAGS_optimizer);
  optimizer->set_learning_rate(absl::GetFlag(FLAGS_lr));
  optimizer->set_weight_decay(absl::GetFlag(FLAGS_weight_decay));
  optimizer->set_schedule(v1::LR_SCHEDULE_KIND_CONSTANT);
  if (name == "sgd") {
    optimizer->set_kind(v1::OPTIMIZER_KIND_SGD);
  } else if (name == "momentum" || name == "nesterov") {
    optimizer->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
    optimizer->set_momentum(absl::GetFlag(FLAGS_momentum));
    optimizer->set_nesterov(name == "nesterov");
  } else if (name == "adam" || name == "adamw") {
    optimizer->set_kind(name == "adam" ? v1::OPTIMIZER_KIND_ADAM
                                       : v1::OPTIMIZER_KIND_ADAMW);
    optimizer->set_momentum(absl::GetFlag(FLAGS_momentum));
    optimizer->set_beta2(0.999f);
    optimizer->set_epsilon(1e-8f);
  } else {
    return Bad("--optimizer: unknown optimizer '%s'", name);
  }
  return absl::OkStatus();
}

absl::Status ReadMode(v1::TrainingConfig* training) {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "bsp") {
    training->set_mode(v1::CONSISTENCY_MODE_BSP);
  } else if (mode == "asp") {
    training->set_mode(v1::CONSISTENCY_MODE_ASP);
  } else if (mode == "ssp") {
    training->set_mode(v1::CONSISTENCY_MODE_SSP);
    const int64_t staleness = absl::GetFlag(FLAGS_staleness);
    if (staleness < 0 || staleness > 1000) {
      return Bad("--staleness: %d is outside [0, 1000]", staleness);
    }
    training->set_staleness(staleness);
  } else {
    return Bad("--mode: '%s' is not bsp, asp or ssp", mode);
  }
  return absl::OkStatus();
}

absl::Status ReadCompressor(SyncOptions* sync) {
  CompressorOptions& c = sync->compressor;
  c.name = absl::GetFlag(FLAGS_compressor);
  c.ratio = absl::GetFlag(FLAGS_ratio);
  c.threshold = static_cast<float>(absl::GetFlag(FLAGS_threshold));
  const int64_t levels = absl::GetFlag(FLAGS_levels);
  if (levels < 1 || levels > 65535)
    return Bad("--levels: %d is outside [1, 65535]", levels);
  c.levels = static_cast<uint32_t>(levels);
  const auto precision = ParsePrecision(absl::GetFlag(FLAGS_value_type));
  if (!precision) {
    return Bad("--value-type: '%s' is not fp32, fp16 or bf16",
               absl::GetFlag(FLAGS_value_type));
  }
  c.precision = *precision;
  c.dgc.momentum = static_cast<float>(absl::GetFlag(FLAGS_dgc_momentum));
  c.dgc.momentum_masking = absl::GetFlag(FLAGS_dgc_momentum_masking);
  c.dgc.clip_norm = static_cast<float>(absl::GetFlag(FLAGS_dgc_clip_norm));
  c.dgc.warmup_epochs =
      static_cast<int>(absl::GetFlag(FLAGS_dgc_warmup_epochs));
  sync->error_feedback = absl::GetFlag(FLAGS_error_feedback);
  auto made = MakeCompressor(c);
  if (!made.ok()) return Bad("--compressor: %s", made.status().message());
  return absl::OkStatus();
}

absl::Status ReadPull(SyncOptions* sync) {
  const std::string pull = absl::GetFlag(FLAGS_pull);
  if (pull == "dense") {
    sync->pull_deltas = false;
    return absl::OkStatus();
  }
  if (pull != "delta") return Bad("--pull: '%s' is not dense or delta", pull);
  const double ratio = absl::GetFlag(FLAGS_pull_ratio);
  if (!(ratio > 0 && ratio <= 1))
    return Bad("--pull-ratio: %g is outside (0, 1]", ratio);
  sync->pull_deltas = true;
  v1::PullEncoding* encoding = sync->training.mutable_pull_encoding();
  encoding->set_compressor("topk");
  encoding->set_ratio(ratio);
  encoding->set_value_type(v1::VALUE_TYPE_FP32);
  return absl::OkStatus();
}

absl::Status ReadTopology(SyncOptions* sync) {
  sync->shard_addresses =
      absl::StrSplit(absl::GetFlag(FLAGS_shards), ',', absl::SkipEmpty());
  if (sync->shard_addresses.empty()) return Bad("--shards: no address given");
  const int64_t workers = absl::GetFlag(FLAGS_num_workers);
  const int64_t id = absl::GetFlag(FLAGS_worker_id);
  if (workers < 1 || workers > 65536)
    return Bad("--num-workers: %d is outside [1, 65536]", workers);
  if (id < 0 || id >= workers)
    return Bad("--worker-id: %d is outside [0, %d)", id, workers);
  sync->num_workers = workers;
  sync->worker_id = id;
  const int64_t local_size = absl::GetFlag(FLAGS_local_size);
  const int64_t local_rank = absl::GetFlag(FLAGS_local_rank);
  if (local_size < 1 || local_size > 64)
    return Bad("--local-size: %d is outside [1, 64]", local_size);
  if (local_rank < 0 || local_rank >= local_size) {
    return Bad("--local-rank: %d is outside [0, %d)", local_rank, local_size);
  }
  sync->local_size = local_size;
  sync->local_rank = local_rank;
  const std::vector<std::string> store =
      absl::StrSplit(absl::GetFlag(FLAGS_local_store), ':');
  int port = 0;
  if (store.size() != 2 || !absl::SimpleAtoi(store[1], &port) || port <= 0 ||
      port > 65535) {
    return Bad("--local-store: '%s' is not host:port",
               absl::GetFlag(FLAGS_local_store));
  }
  sync->local_store_host = store[0];
  sync->local_store_port = port;
  const int64_t partition = absl::GetFlag(FLAGS_partition_bytes);
  if (partition < 4 || partition % 4 != 0) {
    return Bad("--partition-bytes: %d must be a positive multiple of 4",
               partition);
  }
  sync->partition_bytes = partition;
  const double timeout = absl::GetFlag(FLAGS_rpc_timeout_seconds);
  if (!(timeout > 0))
    return Bad("--rpc-timeout-seconds: %g must be > 0", timeout);
  sync->rpc_timeout = absl::Seconds(timeout);
  return absl::OkStatus();
}

// Reads the TLS and token files now, so that a bad one is a usage error.
absl::Status ReadTransport(SyncOptions* sync) {
  TransportSecurityFiles files;
  files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  files.tls_key = absl::GetFlag(FLAGS_tls_key);
  files.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  files.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  files.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  absl::StatusOr<TransportSecurity> transport =
      LoadTransportSecurity(files, TransportRole::kClient);
  if (!transport.ok()) return transport.status();
  sync->transport = *std::move(transport);
  return absl::OkStatus();
}

absl::Status ReadTrainer(TrainerOptions* t, const SyncOptions& sync) {
  t->data_dir = absl::GetFlag(FLAGS_data_dir);
  t->model = absl::GetFlag(FLAGS_model);
  if (t->model != "cnn" && t->model != "mlp")
    return Bad("--model: '%s' is not mlp or cnn", t->model);
  t->epochs = absl::GetFlag(FLAGS_epochs);
  if (t->epochs < 0) return Bad("--epochs: %d is negative", t->epochs);
  t->batch_size = absl::GetFlag(FLAGS_batch_size);
  if (t->batch_size < 1)
    return Bad("--batch-size: %d must be >= 1", t->batch_size);
  const int64_t max_steps = absl::GetFlag(FLAGS_max_steps);
  if (max_steps < 0) return Bad("--max-steps: %d is negative", max_steps);
  t->max_steps = max_steps;
  t->train_limit = absl::GetFlag(FLAGS_train_limit);
  t->test_limit = absl::GetFlag(FLAGS_test_limit);
  if (t->train_limit < 0 || t->test_limit < 0)
    return Bad("--train-limit/--test-limit must be >= 0");
  t->seed = absl::GetFlag(FLAGS_seed);
  t->evaluate = absl::GetFlag(FLAGS_evaluate);
  const int64_t delay_ms = absl::GetFlag(FLAGS_step_delay_ms);
  if (delay_ms < 0 || delay_ms > 3600000) {
    return Bad("--step-delay-ms: %d is outside [0, 3600000]", delay_ms);
  }
  t->step_delay = absl::Milliseconds(delay_ms);
  t->step_delay_every = absl::GetFlag(FLAGS_step_delay_every);
  if (t->step_delay_every < 1) {
    return Bad("--step-delay-every: %d must be >= 1", t->step_delay_every);
  }
  const std::string progress = absl::GetFlag(FLAGS_progress);
  if (progress == "auto") {
    t->interactive = Progress::StdoutIsTerminal();
  } else if (progress == "bar" || progress == "log" || progress == "none") {
    t->interactive = progress == "bar";
    t->quiet = progress == "none";
  } else {
    return Bad("--progress: '%s' is not auto, bar, log or none", progress);
  }
  if (sync.local_rank != 0) t->quiet = true;
  return absl::OkStatus();
}

// Every flag of gradwire-worker, in --help order.
constexpr absl::string_view kWorkerFlags[] = {"shards",
                                              "worker_id",
                                              "num_workers",
                                              "local_rank",
                                              "local_size",
                                              "local_store",
                                              "data_dir",
                                              "model",
                                              "epochs",
                                              "batch_size",
                                              "max_steps",
                                              "train_limit",
                                              "test_limit",
                                              "seed",
                                              "evaluate",
                                              "compressor",
                                              "ratio",
                                              "threshold",
                                              "levels",
                                              "value_type",
                                              "error_feedback",
                                              "dgc_momentum",
                                              "dgc_momentum_masking",
                                              "dgc_clip_norm",
                                              "dgc_warmup_epochs",
                                              "pull",
                                              "pull_ratio",
                                              "optimizer",
                                              "lr",
                                              "momentum",
                                              "weight_decay",
                                              "mode",
                                              "staleness",
                                              "partition_bytes",
                                              "rpc_timeout_seconds",
                                              "tls_cert",
                                              "tls_key",
                                              "tls_ca",
                                              "tls_server_name",
                                              "auth_token_file",
                                              "progress",
                                              "step_delay_ms",
                                              "step_delay_every",
                                              "summary_json",
                                              "metrics_address",
                                              "metrics_port",
                                              "metrics_port_file",
                                              "metrics_linger_seconds",
                                              "dry_run"};

}  // namespace

absl::StatusOr<WorkerConfig> WorkerConfigFromFlags() {
  WorkerConfig config;
  for (absl::Status s :
       {ReadTopology(&config.sync), ReadCompressor(&config.sync),
        ReadOptimizer(config.sync.training.mutable_optimizer()),
        ReadMode(&config.sync.training), ReadPull(&config.sync),
        ReadTransport(&config.sync)}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = ReadTrainer(&config.trainer, config.sync); !s.ok())
    return s;
  config.summary_json = absl::GetFlag(FLAGS_summary_json);
  config.dry_run = absl::GetFlag(FLAGS_dry_run);
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  config.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  config.metrics_linger_seconds = absl::GetFlag(FLAGS_metrics_linger_seconds);
  if (!(config.metrics_linger_seconds >= 0 &&
        config.metrics_linger_seconds <= 3600)) {
    return Bad("--metrics-linger-seconds: %g is outside [0, 3600]",
               config.metrics_linger_seconds);
  }
  if (config.metrics_port < -1 || config.metrics_port > 65535) {
    return Bad("--metrics-port: %d is outside [-1, 65535]",
               config.metrics_port);
  }
  if (config.metrics_port == -1 && !config.metrics_port_file.empty()) {
    return Bad("--metrics-port-file needs the endpoint (--metrics-port=-1)");
  }
  return config;
}

absl::Span<const absl::string_view> WorkerFlagNames() { return kWorkerFlags; }

std::string WorkerFlagsHelp() {
  return FlagsHelp(
      "gradwire-worker: trains Fashion-MNIST on gradwire parameter servers.\n"
      "Example: gradwire-worker --shards=127.0.0.1:7000,127.0.0.1:7001 "
      "--worker-id=0 --num-workers=2 --compressor=topk --ratio=0.01\n\n" +
          std::string(kFlagEnvironmentHelp),
      kWorkerFlags);
}

}  // namespace gradwire
