#include "worker/settings_table.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "worker/sync_settings.h"

namespace gradwire {
namespace {

template <typename T>
constexpr SettingType TypeOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return SettingType::kBool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return SettingType::kInt64;
  } else if constexpr (std::is_same_v<T, double>) {
    return SettingType::kDouble;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return SettingType::kString;
  } else {
    static_assert(std::is_same_v<T, StringList>, "not a setting type");
    return SettingType::kStringList;
  }
}

#define GRADWIRE_SETTING_INFO(Type, name, default_value, group, front_ends, \
                              range, help)                                  \
  SettingInfo{#name, TypeOf<Type>(), group, front_ends, range, help, false},
#define GRADWIRE_TRANSPORT_INFO(Type, name, default_value, group, front_ends, \
                                range, help)                                  \
  SettingInfo{#name, TypeOf<Type>(), group, front_ends, range, help, true},
constexpr SettingInfo kSettings[] = {
    GRADWIRE_SYNC_SETTINGS(GRADWIRE_SETTING_INFO)
        GRADWIRE_TRANSPORT_SETTINGS(GRADWIRE_TRANSPORT_INFO)};
#undef GRADWIRE_SETTING_INFO
#undef GRADWIRE_TRANSPORT_INFO

// The transport entries describe fields of TransportSecurityFiles: their
// types must be the fields' types.
#define GRADWIRE_TRANSPORT_TYPE(Type, name, ...)                              \
  static_assert(std::is_same_v<Type, decltype(TransportSecurityFiles::name)>, \
                #name " has another type in TransportSecurityFiles");
GRADWIRE_TRANSPORT_SETTINGS(GRADWIRE_TRANSPORT_TYPE)
#undef GRADWIRE_TRANSPORT_TYPE

// Levenshtein distance; names are short.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Bound(SettingType type, double bound) {
  if (type == SettingType::kInt64 || bound == std::floor(bound)) {
    if (std::fabs(bound) < 1e15) return absl::StrFormat("%.0f", bound);
  }
  return absl::StrFormat("%g", bound);
}

bool InRange(const SettingRange& r, double value) {
  const bool above_min = r.min_open ? value > r.min : value >= r.min;
  const bool below_max = r.max_open ? value < r.max : value <= r.max;
  return above_min && below_max;  // false for NaN
}

// "a, b or c" for choices "a|b|c".
std::string ChoicesText(absl::string_view choices) {
  std::string text = absl::StrReplaceAll(choices, {{"|", ", "}});
  const size_t last = text.rfind(", ");
  if (last != std::string::npos) text.replace(last, 2, " or ");
  return text;
}

}  // namespace

absl::Span<const SettingInfo> SettingInfos() { return kSettings; }

const SettingInfo* FindSetting(absl::string_view name) {
  for (const SettingInfo& info : kSettings) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string ClosestSettingName(absl::string_view name) {
  absl::string_view best;
  size_t best_distance = ~size_t{0};
  for (const SettingInfo& info : kSettings) {
    const size_t d = EditDistance(name, info.name);
    if (d < best_distance) {
      best = info.name;
      best_distance = d;
    }
  }
  return std::string(best);
}

absl::string_view SettingTypeName(SettingType type) {
  switch (type) {
    case SettingType::kBool:
      return "bool";
    case SettingType::kInt64:
      return "int";
    case SettingType::kDouble:
      return "float";
    case SettingType::kString:
      return "str";
    case SettingType::kStringList:
      return "list[str]";
  }
  return "?";
}

std::string SettingEnvironmentVariable(absl::string_view name) {
  return absl::StrCat("GRADWIRE_", absl::AsciiStrToUpper(name));
}

std::string DescribeRange(const SettingInfo& info) {
  const SettingRange& r = info.range;
  if (!r.choices.empty()) return absl::StrReplaceAll(r.choices, {{"|", ", "}});
  if (!r.bounded()) return "";
  if (std::isinf(r.max)) {
    return absl::StrCat(r.min_open ? "> " : ">= ", Bound(info.type, r.min));
  }
  return absl::StrCat(r.min_open ? "(" : "[", Bound(info.type, r.min), ", ",
                      Bound(info.type, r.max), r.max_open ? ")" : "]");
}

std::string RangeViolation(const SettingInfo& info, double value) {
  if (!info.range.bounded() || InRange(info.range, value)) return "";
  return absl::StrCat(Bound(info.type, value), " is outside ",
                      DescribeRange(info));
}

std::string RangeViolation(const SettingInfo& info, int64_t value) {
  return RangeViolation(info, static_cast<double>(value));
}

std::string RangeViolation(const SettingInfo& info, absl::string_view value) {
  const absl::string_view choices = info.range.choices;
  if (choices.empty()) return "";
  for (absl::string_view choice : absl::StrSplit(choices, '|')) {
    if (choice == value) return "";
  }
  return absl::StrCat("'", value, "' is not ", ChoicesText(choices));
}

absl::Status CheckSettingRanges(const SyncSettings& settings,
                                const SettingNamer& namer) {
  absl::Status status;
  ForEachSetting(settings, [&](const SettingInfo& info, const auto& value) {
    if (!status.ok() || info.range.conditional) return;
    const std::string outside = RangeViolation(info, value);
    if (!outside.empty()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(namer(info.name), ": ", outside));
    }
  });
  return status;
}

}  // namespace gradwire
