// The settings that compressor "auto" (auto_compression.h) allows beside
// it: SyncOptionsFromSettings asks CheckAutoCompressor before it resolves
// any compressor.
//
// Thread safety: a pure function.
#ifndef GRADWIRE_WORKER_AUTO_SETTINGS_H_
#define GRADWIRE_WORKER_AUTO_SETTINGS_H_

#include <optional>
#include <string>

#include "common/compress/compressor.h"
#include "worker/sync_settings.h"

namespace gradwire {

// A setting that cannot stand: its key in snake_case and what is wrong.
struct SettingProblem {
  std::string key;
  std::string message;
};

// With --compressor=auto: an explicit --ratio (any other than its default;
// the default itself cannot be told from an explicit one), no error
// feedback, --pull=exact, or `compressor` (the resolved options) that make
// no Top-K rung. With another compressor: an --auto-budget other than its
// default. None when the settings can stand.
std::optional<SettingProblem> CheckAutoCompressor(
    const SyncSettings& s, const CompressorOptions& compressor);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_AUTO_SETTINGS_H_
