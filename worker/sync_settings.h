// The worker's synchronisation settings by name, as a person writes them:
// the flags of gradwire-worker and the keyword arguments of the Python
// package (python/) both fill a SyncSettings, and SyncOptionsFromSettings
// alone decides what "momentum", "ssp" or "delta" means and which values
// are allowed. The defaults here are the defaults of every front end.
//
// Thread safety: plain values and a pure function.
#ifndef GRADWIRE_WORKER_SYNC_SETTINGS_H_
#define GRADWIRE_WORKER_SYNC_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tls/transport_security.h"
#include "worker/sync_options.h"

namespace gradwire {

struct SyncSettings {
  // Shard addresses (host:port), in shard-id order.
  std::vector<std::string> shards = {"127.0.0.1:7000"};
  int64_t worker_id = 0;
  int64_t num_workers = 1;
  // Ranks of one node average their gradients (c10d) before pushing.
  int64_t local_rank = 0;
  int64_t local_size = 1;
  std::string local_store = "127.0.0.1:29500";
  // Gradient compression (common/compress/registry.h names).
  std::string compressor = "topk";
  double ratio = 0.01;
  double threshold = 0.001;
  int64_t levels = 256;
  std::string value_type = "fp16";
  bool error_feedback = true;
  double dgc_momentum = 0.0;
  bool dgc_momentum_masking = true;
  double dgc_clip_norm = 0.0;
  int64_t dgc_warmup_epochs = 0;
  // Pulls: "dense" or "delta" (Top-K `pull_ratio` deltas).
  std::string pull = "delta";
  double pull_ratio = 0.05;
  // The shards' optimizer: sgd, momentum, nesterov, adam, adamw.
  std::string optimizer = "momentum";
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  // Consistency: bsp, asp or ssp (with `staleness`).
  std::string mode = "bsp";
  int64_t staleness = 2;
  int64_t partition_bytes = int64_t{4} << 20;
  // Deadlines: each Init and Push; a Pull waiting for its step.
  double rpc_timeout_seconds = 30;
  double pull_timeout_seconds = 300;
  // How long connecting waits for every shard to answer.
  double connect_timeout_seconds = 30;
  // TLS and token files; read (and checked) by SyncOptionsFromSettings.
  TransportSecurityFiles transport;
};

// How an error message names a setting, given its key in snake_case
// ("value_type"): gradwire-worker says "--value-type", Python "value_type".
using SettingNamer = std::function<std::string(absl::string_view key)>;

// "--" + key with '_' turned into '-'.
std::string FlagName(absl::string_view key);

// Validates `settings` and resolves them into SyncOptions (metrics
// registry unset). Reads the TLS and token files. Errors:
// INVALID_ARGUMENT whose message starts with the offending setting's name,
// as `namer` writes it; a TLS file's own error for a bad certificate.
absl::StatusOr<SyncOptions> SyncOptionsFromSettings(
    const SyncSettings& settings, const SettingNamer& namer = FlagName);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SYNC_SETTINGS_H_
