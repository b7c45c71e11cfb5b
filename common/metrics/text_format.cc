#include "common/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace gradwire::metrics {
namespace {

// Integers below this magnitude are exact in a double and printed as such.
constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53

// The shortest text that reads back to `value` exactly. std::to_chars,
// unlike printf, ignores the locale, so a decimal comma cannot sneak in.
std::string ShortestRoundTrip(double value) {
  char text[64];
  const std::to_chars_result result =
      std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

void AppendEscaped(absl::string_view text, bool escape_quotes,
                   std::string* out) {
  for (char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quotes) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

void AppendSample(const Sample& sample, std::string* out) {
  out->append(sample.name);
  if (!sample.labels.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < sample.labels.size(); ++i) {
      if (i > 0) out->push_back(',');
      absl::StrAppend(out, sample.labels[i].first, "=\"");
      AppendEscaped(sample.labels[i].second, /*escape_quotes=*/true, out);
      out->push_back('"');
    }
    out->push_back('}');
  }
  absl::StrAppend(out, " ", FormatValue(sample.value), "\n");
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegerLimit) {
    // Also turns -0 into "0".
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return ShortestRoundTrip(value);
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscaped(value, /*escape_quotes=*/true, &out);
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  AppendEscaped(help, /*escape_quotes=*/false, &out);
  return out;
}

std::string SerializeText(absl::Span<const FamilySnapshot> families) {
  std::string out;
  for (const FamilySnapshot& family : families) {
    if (family.samples.empty()) continue;
    absl::StrAppend(&out, "# HELP ", family.name, " ");
    AppendEscaped(family.help, /*escape_quotes=*/false, &out);
    absl::StrAppend(&out, "\n# TYPE ", family.name, " ", TypeName(family.type),
                    "\n");
    for (const Sample& sample : family.samples) AppendSample(sample, &out);
  }
  return out;
}

}  // namespace gradwire::metrics
