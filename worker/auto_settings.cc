#include "worker/auto_settings.h"

#include "absl/strings/str_format.h"
#include "common/compress/auto/ratio_ladder.h"
#include "common/compress/registry.h"

namespace gradwire {

std::optional<SettingProblem> CheckAutoCompressor(
    const SyncSettings& s, const CompressorOptions& compressor) {
  const SyncSettings defaults;
  if (s.compressor != "auto") {
    if (s.auto_budget == defaults.auto_budget) return std::nullopt;
    return SettingProblem{
        "auto_budget", absl::StrFormat("applies to --compressor=auto, not to "
                                       "'%s'",
                                       s.compressor)};
  }
  if (s.ratio != defaults.ratio) {
    return SettingProblem{
        "ratio",
        absl::StrFormat("%g is set, but --compressor=auto chooses the ratio "
                        "of each layer; leave --ratio out (--auto-budget sizes "
                        "the pushes)",
                        s.ratio)};
  }
  if (!s.error_feedback) {
    return SettingProblem{"error_feedback",
                          "--compressor=auto needs error feedback: its Top-K "
                          "rungs leave most of each gradient to later steps"};
  }
  auto made = MakeCompressor(RungCompressorOptions(kStartRung, compressor));
  if (!made.ok()) {
    return SettingProblem{"compressor", std::string(made.status().message())};
  }
  return std::nullopt;
}

}  // namespace gradwire
