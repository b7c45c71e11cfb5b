#include "common/metrics/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gradwire::metrics {
namespace {

// [a-zA-Z_][a-zA-Z0-9_]*: the syntax of label names, and of metric names
// without the colon.
bool IsIdentifier(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status Invalid(absl::string_view what, absl::string_view name,
                     absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " \"", name, "\": ", rule));
}

// Length of the UTF-8 sequence starting with `lead`, 0 if it cannot start
// one.
int SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether the n-byte sequence at `s` decodes to a scalar value that is
// neither overlong, a surrogate, nor beyond U+10FFFF.
bool IsValidSequence(const unsigned char* s, int n) {
  for (int i = 1; i < n; ++i) {
    if ((s[i] & 0xC0) != 0x80) return false;
  }
  if (n == 3) {
    if (s[0] == 0xE0 && s[1] < 0xA0) return false;   // overlong
    if (s[0] == 0xED && s[1] >= 0xA0) return false;  // surrogate
  }
  if (n == 4) {
    if (s[0] == 0xF0 && s[1] < 0x90) return false;   // overlong
    if (s[0] == 0xF4 && s[1] >= 0x90) return false;  // above U+10FFFF
  }
  return true;
}

}  // namespace

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

absl::Status ValidateMetricName(absl::string_view name, MetricType type) {
  if (!IsIdentifier(name)) {
    return Invalid("metric name", name,
                   "must match [a-zA-Z_][a-zA-Z0-9_]* (':' is reserved for "
                   "recording rules)");
  }
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      return Invalid("metric name", name,
                     absl::StrCat("must not end in ", suffix,
                                  ", a suffix of histogram samples"));
    }
  }
  if (type == MetricType::kCounter && !absl::EndsWith(name, "_total")) {
    return Invalid("counter name", name, "must end in _total");
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelName(absl::string_view name, MetricType type) {
  if (!IsIdentifier(name)) {
    return Invalid("label name", name, "must match [a-zA-Z_][a-zA-Z0-9_]*");
  }
  if (absl::StartsWith(name, "__")) {
    return Invalid("label name", name,
                   "names starting with __ are reserved for Prometheus");
  }
  if (type == MetricType::kHistogram && name == "le") {
    return Invalid("label name", name,
                   "is reserved for the bucket bounds of histograms");
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(const Labels& labels, MetricType type) {
  for (const auto& [name, value] : labels) {
    if (absl::Status s = ValidateLabelName(name, type); !s.ok()) return s;
    if (absl::Status s = ValidateUtf8(value, absl::StrCat("label ", name));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateUtf8(absl::string_view text, absl::string_view what) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const int n = SequenceLength(bytes[i]);
    if (n == 0 || i + n > text.size() || !IsValidSequence(bytes + i, n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": not valid UTF-8 at byte ", i));
    }
    i += n;
  }
  return absl::OkStatus();
}

}  // namespace gradwire::metrics
