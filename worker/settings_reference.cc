#include "worker/settings_reference.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace gradwire {
namespace {

constexpr absl::string_view kPageHead =
    R"(# Settings reference

Generated from `worker/settings_table.h` by `gradwire-settings-doc`; do not
edit by hand. After changing the table, run `make settings-doc`.

Every setting of the worker is declared once, in that table, and reaches
its front ends from there:

- **flag**: `gradwire-worker --name-with-hyphens=VALUE` (also
  `gradwire local`, which passes worker flags on). gradwire-worker reads
  every flag from `GRADWIRE_<NAME>` too; the command line wins. The
  security flags are the client TLS flags shared by the gradwire binaries.
- **keyword**: `gradwire.ParameterSync(name=VALUE)` and the options of
  `gradwire.torch.DistributedOptimizer`; `gradwire.settings()` lists them.
  A keyword of the wrong type raises TypeError, a value outside its range
  ValueError naming the setting.
- **env**: the variable a Python worker reads in `gradwire.init()`, which
  `gradwire run` sets. The worker's place in the job comes from `RANK`,
  `WORLD_SIZE`, `LOCAL_RANK` and `LOCAL_WORLD_SIZE` (torchrun's names).

A range marked "where used" is checked only where the setting takes
effect (for example `staleness` with `mode=ssp`).
)";

std::string Escape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}});
}

std::string FrontEnds(const SettingInfo& info) {
  std::vector<std::string> shown = {absl::StrCat(
      "flag `--", absl::StrReplaceAll(info.name, {{"_", "-"}}), "`")};
  if (info.front_ends & kPythonKeyword) shown.push_back("keyword");
  if (info.front_ends & kRunEnvironment) {
    shown.push_back(
        absl::StrCat("env `", SettingEnvironmentVariable(info.name), "`"));
  }
  return absl::StrJoin(shown, ", ");
}

std::string RangeCell(const SettingInfo& info) {
  std::string range = DescribeRange(info);
  if (range.empty()) return "any";
  if (info.range.conditional) absl::StrAppend(&range, " where used");
  return Escape(range);
}

}  // namespace

std::string FormatSettingValue(bool value) { return value ? "true" : "false"; }
std::string FormatSettingValue(int64_t value) { return absl::StrCat(value); }
std::string FormatSettingValue(double value) {
  return absl::StrFormat("%g", value);
}
std::string FormatSettingValue(const std::string& value) {
  return absl::StrCat("\"", value, "\"");
}
std::string FormatSettingValue(const StringList& value) {
  return absl::StrCat("\"", absl::StrJoin(value, ","), "\"");
}

std::string SettingDefault(absl::string_view name) {
  const SyncSettings defaults;
  std::string text;
  ForEachSetting(defaults, [&](const SettingInfo& info, const auto& value) {
    if (info.name == name) text = FormatSettingValue(value);
  });
  return text;
}

std::string SettingsReferenceMarkdown() {
  std::string page(kPageHead);
  absl::string_view group;
  for (const SettingInfo& info : SettingInfos()) {
    if (info.group != group) {
      group = info.group;
      absl::StrAppend(&page, "\n## ", group, "\n\n",
                      "| name | type | default | range | front ends | help "
                      "|\n|---|---|---|---|---|---|\n");
    }
    absl::StrAppend(&page, "| `", info.name, "` | ", SettingTypeName(info.type),
                    " | `", SettingDefault(info.name), "` | ", RangeCell(info),
                    " | ", FrontEnds(info), " | ", Escape(info.help), " |\n");
  }
  return page;
}

std::string DescribeSettings(const SyncSettings& settings) {
  std::vector<std::string> given;
  ForEachSetting(settings, [&](const SettingInfo& info, const auto& value) {
    if (info.transport) return;
    const std::string text = FormatSettingValue(value);
    if (text != SettingDefault(info.name)) {
      given.push_back(absl::StrCat(info.name, "=", text));
    }
  });
  if (given.empty()) return "settings: defaults";
  return absl::StrCat("settings: ", absl::StrJoin(given, " "));
}

std::string DescribeOptimizerPlacement(const SyncOptions& options) {
  const v1::OptimizerConfig& optimizer = options.training.optimizer();
  std::string shards;
  switch (optimizer.kind()) {
    case v1::OPTIMIZER_KIND_MOMENTUM:
      shards = absl::StrFormat("%s %g",
                               optimizer.nesterov() ? "nesterov" : "momentum",
                               optimizer.momentum());
      break;
    case v1::OPTIMIZER_KIND_ADAM:
      shards = "adam";
      break;
    case v1::OPTIMIZER_KIND_ADAMW:
      shards = "adamw";
      break;
    case v1::OPTIMIZER_KIND_MEAN:
      return "optimizer: none on the shards, which hand each step's mean on";
    default:
      shards = "SGD";
  }
  absl::StrAppendFormat(&shards, " lr %g on the shards",
                        optimizer.learning_rate());
  if (optimizer.freeze_variance_after() > 0) {
    const MomentumCorrectionOptions& u = options.worker_momentum;
    return absl::StrFormat(
        "optimizer: 1-bit Adam: dense fp32 pushes for %d steps, then the "
        "first moment (beta1 %g) on the worker before compression%s; %s, its "
        "second moment frozen after update %d",
        u.dense_steps, u.momentum,
        u.masking ? " (masked where a sparse push sent)" : "", shards,
        optimizer.freeze_variance_after());
  }
  if (options.folded_momentum > 0) {
    return absl::StrFormat(
        "optimizer: momentum %g folded into the step (%g of lr / (1 - "
        "momentum); error feedback carries the history); %s",
        options.folded_momentum, options.fold_scale, shards);
  }
  if (!options.worker_momentum.enabled()) {
    return absl::StrCat("optimizer: ", shards);
  }
  return absl::StrFormat(
      "optimizer: %s %g on the worker before compression%s; %s",
      options.worker_momentum.nesterov ? "nesterov" : "momentum",
      options.worker_momentum.momentum,
      options.worker_momentum.masking ? " (masked where a sparse push sent)"
                                      : "",
      shards);
}

}  // namespace gradwire
