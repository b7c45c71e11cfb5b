// Texts made from the table of settings (settings_table.h): the reference
// page docs/reference/settings.md, the defaults as the page shows them, and
// the line a worker logs at start with the settings it was given.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_WORKER_SETTINGS_REFERENCE_H_
#define GRADWIRE_WORKER_SETTINGS_REFERENCE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "worker/sync_settings.h"

namespace gradwire {

// The command that writes docs/reference/settings.md, for the page and for
// the test that compares it with the checked-in copy.
inline constexpr absl::string_view kSettingsDocCommand = "make settings-doc";

// `value` as the reference writes it: true/false, 64, 0.01, "topk",
// "a,b" (a string list as the flag takes it).
std::string FormatSettingValue(bool value);
std::string FormatSettingValue(int64_t value);
std::string FormatSettingValue(double value);
std::string FormatSettingValue(const std::string& value);
std::string FormatSettingValue(const StringList& value);

// The default of setting `name` (FormatSettingValue of SyncSettings{}'s
// field); empty for an unknown name.
std::string SettingDefault(absl::string_view name);

// docs/reference/settings.md: one table per group with each setting's
// name, type, default, range, front ends and help. Deterministic.
std::string SettingsReferenceMarkdown();

// "settings: compressor=onebit mode=asp" — the settings of GRADWIRE_SYNC_
// SETTINGS whose values differ from their defaults, in table order
// ("settings: defaults" when none does). For the start of a run's log.
std::string DescribeSettings(const SyncSettings& settings);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SETTINGS_REFERENCE_H_
