// The worker's synchronisation settings by name, as a person writes them:
// the flags of gradwire-worker and the keyword arguments of the Python
// package (python/) both fill a SyncSettings, and SyncOptionsFromSettings
// alone decides what "momentum", "ssp" or "delta" means and which values
// are allowed. The fields, their defaults, bounds and help are declared
// once, in settings_table.h; the defaults are those of every front end.
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
#include "absl/types/span.h"
#include "common/tls/transport_security.h"
#include "worker/settings_table.h"
#include "worker/sync_options.h"

namespace gradwire {

// Where the optimizer's momentum m runs.
enum class MomentumPlacement {
  // On the shards, after aggregation (dense momentum SGD, exact when the
  // pushes are the gradients).
  kServer,
  // On each worker, before compression (momentum_correction.h), with SGD
  // on the shards.
  kWorker,
  // Nowhere as a velocity: the shards run SGD at fold_scale * lr / (1 - m),
  // a share of momentum's long-run step, and the error-feedback residual,
  // which releases what compression held back over later steps, stands in
  // for the velocity.
  // "auto" chooses it for 1-bit sign with error feedback, the one
  // compressor under which a worker velocity diverges; it diverges on the
  // CNN for sparsifiers.
  kFold,
};

// The delta pull ratio that pull_ratio 0 means beside a compressor that
// keeps every element (none, fp16, bf16, qsgd, onebit).
inline constexpr double kDenseCompressorPullRatio = 0.05;
// The smallest ratio pull_ratio 0 picks beside a sparsifier. Pulls at the
// push's ratio cost DGC 0.1% much of its accuracy on the MLP, while 1%
// pulls keep Top-K 1% where 5% pulls had it
// (docs/benchmarks/pulls.md#convergence-rows).
inline constexpr double kMinAutoPullRatio = 0.01;

// SyncSettings::fold_scale's default: at momentum 0.9 the folded step is
// 4 * lr.
inline constexpr double kDefaultFoldScale = 0.4;

// SyncSettings::adam_freeze_step's default. On the MLP with Top-K 1% + EF
// it trained best of the freeze steps measured: fewer lost accuracy, and
// more gained none while their dense pushes multiplied the pushed bytes
// (docs/convergence.md#measured-mlp-10-epochs-3-seeds-adam-lr-0001).
inline constexpr int64_t kDefaultAdamFreezeStep = 50;

// Every setting of GRADWIRE_SYNC_SETTINGS (settings_table.h) as a field
// of its type with its default, in table order, and the transport's files.
struct SyncSettings {
#define GRADWIRE_SETTING_FIELD(Type, name, default_value, ...) \
  Type name = default_value;
  GRADWIRE_SYNC_SETTINGS(GRADWIRE_SETTING_FIELD)
#undef GRADWIRE_SETTING_FIELD
  // TLS and token files (GRADWIRE_TRANSPORT_SETTINGS); read (and checked)
  // by SyncOptionsFromSettings.
  TransportSecurityFiles transport;
};

// Calls visit(const SettingInfo&, field) for every setting of `settings`
// (a SyncSettings, const or not), in SettingInfos() order; `field` is a
// reference to the field, of the entry's type.
template <typename Settings, typename Visit>
void ForEachSetting(Settings& settings, Visit&& visit) {
  const absl::Span<const SettingInfo> infos = SettingInfos();
#define GRADWIRE_VISIT_SETTING(Type, name, ...) \
  visit(infos[static_cast<size_t>(SettingIndex::name)], settings.name);
#define GRADWIRE_VISIT_TRANSPORT(Type, name, ...)       \
  visit(infos[static_cast<size_t>(SettingIndex::name)], \
        settings.transport.name);
  GRADWIRE_SYNC_SETTINGS(GRADWIRE_VISIT_SETTING)
  GRADWIRE_TRANSPORT_SETTINGS(GRADWIRE_VISIT_TRANSPORT)
#undef GRADWIRE_VISIT_SETTING
#undef GRADWIRE_VISIT_TRANSPORT
}

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

// The first setting (in table order) whose value is outside its table
// range or choices, ranges marked Conditional aside: INVALID_ARGUMENT
// "NAME: 0 is outside (0, 1]" with NAME as `namer` writes it; OK when
// every value is allowed. SyncOptionsFromSettings calls it first.
// (Defined in settings_table.cc.)
absl::Status CheckSettingRanges(const SyncSettings& settings,
                                const SettingNamer& namer = FlagName);

// One line saying what runs where: "momentum 0.9 on the worker before
// compression (masked where sent); SGD lr 0.05 on the shards", for the
// start of a run's log. (Defined in settings_reference.cc.)
std::string DescribeOptimizerPlacement(const SyncOptions& options);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SYNC_SETTINGS_H_
