#include "python/py_settings.h"

#include <pybind11/stl.h>

#include <cmath>
#include <regex>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "worker/settings_reference.h"

namespace py = pybind11;

namespace gradwire {
namespace {

// Sets the field `value` is for, or raises TypeError naming `key`.
template <typename T>
void Assign(const SettingInfo& info, const py::handle& value, T* field) {
  try {
    *field = value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(absl::StrCat(
        info.name, ": expected ", SettingTypeName(info.type), ", got ",
        py::str(value.get_type().attr("__name__")).cast<std::string>()));
  }
}

void SetKeyword(SyncSettings* settings, const std::string& key,
                const py::handle& value) {
  const SettingInfo* found = FindSetting(key);
  if (found == nullptr || !(found->front_ends & kPythonKeyword)) {
    throw py::type_error(absl::StrCat("ParameterSync: unknown keyword '", key,
                                      "' (did you mean '",
                                      ClosestSettingName(key), "'?)"));
  }
  ForEachSetting(*settings, [&](const SettingInfo& info, auto& field) {
    if (&info == found) Assign(info, value, &field);
  });
}

// The help as Python reads it: "--num-workers" becomes "num_workers".
std::string KeywordHelp(absl::string_view help) {
  static const std::regex kFlag("--([a-z0-9]+(-[a-z0-9]+)*)");
  std::string text(help);
  std::string out;
  std::sregex_iterator it(text.begin(), text.end(), kFlag), end;
  size_t last = 0;
  for (; it != end; ++it) {
    out.append(text, last, it->position() - last);
    out += absl::StrReplaceAll(it->str(1), {{"-", "_"}});
    last = it->position() + it->length();
  }
  out.append(text, last, std::string::npos);
  return out;
}

// Breaks `text` into lines of at most `width` characters: the first after
// two spaces, the others after six.
std::string Wrap(absl::string_view text, size_t width) {
  std::string out, line;
  absl::string_view indent = "  ";
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() &&
        indent.size() + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, indent, line, "\n");
      line.clear();
      indent = "      ";
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, indent, line, "\n");
  return out;
}

// ", in (0, 1]", ", >= 1", ", one of bsp, asp, ssp" or "" (any value),
// with " where used" for a conditional range.
std::string RangeInWords(const SettingInfo& info) {
  const std::string range = DescribeRange(info);
  if (range.empty()) return "";
  const char* lead = !info.range.choices.empty()          ? ", one of "
                     : range[0] == '(' || range[0] == '[' ? ", in "
                                                          : ", ";
  return absl::StrCat(lead, range, info.range.conditional ? " where used" : "");
}

template <typename T>
py::object Bound(double bound) {
  if (std::isinf(bound)) return py::none();
  if constexpr (std::is_same_v<T, int64_t>) {
    return py::int_(static_cast<int64_t>(bound));
  }
  return py::float_(bound);
}

template <typename T>
py::dict Describe(const SettingInfo& info, const T& default_value) {
  py::dict d;
  d["name"] = std::string(info.name);
  d["type"] = std::string(SettingTypeName(info.type));
  d["default"] = py::cast(default_value);
  d["group"] = std::string(info.group);
  d["help"] = std::string(info.help);
  py::list choices;
  if (!info.range.choices.empty()) {
    for (absl::string_view c : absl::StrSplit(info.range.choices, '|')) {
      choices.append(std::string(c));
    }
  }
  d["choices"] = choices;
  d["min"] = Bound<T>(info.range.min);
  d["max"] = Bound<T>(info.range.max);
  d["min_open"] = info.range.min_open;
  d["max_open"] = info.range.max_open;
  d["conditional"] = info.range.conditional;
  d["flag"] = FlagName(info.name);
  d["keyword"] = (info.front_ends & kPythonKeyword) != 0;
  d["environment"] =
      (info.front_ends & kRunEnvironment)
          ? py::object(py::str(SettingEnvironmentVariable(info.name)))
          : py::none();
  return d;
}

}  // namespace

SyncSettings SettingsFromKeywords(const py::kwargs& keywords) {
  if (!keywords.contains("shards")) {
    throw py::type_error("ParameterSync: missing keyword 'shards'");
  }
  SyncSettings settings;
  for (const auto& [key, value] : keywords) {
    SetKeyword(&settings, key.cast<std::string>(), value);
  }
  return settings;
}

std::string KeywordSettingsDoc() {
  std::string doc;
  absl::string_view group;
  const SyncSettings defaults;
  ForEachSetting(defaults, [&](const SettingInfo& info, const auto& value) {
    if (!(info.front_ends & kPythonKeyword)) return;
    if (info.group != group) {
      group = info.group;
      absl::StrAppend(&doc, group, "\n");
    }
    const std::string entry =
        absl::StrCat(info.name, " (", SettingTypeName(info.type), ", default ",
                     py::repr(py::cast(value)).template cast<std::string>(),
                     RangeInWords(info), "): ", KeywordHelp(info.help));
    absl::StrAppend(&doc, Wrap(entry, 76));
  });
  return doc;
}

py::list SettingsAsPython() {
  const SyncSettings defaults;
  py::list settings;
  ForEachSetting(defaults, [&](const SettingInfo& info, const auto& value) {
    settings.append(Describe(info, value));
  });
  return settings;
}

}  // namespace gradwire
