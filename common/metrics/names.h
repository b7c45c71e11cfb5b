// Metric types, labels, and the naming rules of the Prometheus data model,
// checked when a metric family or a labelled child is registered.
//
// Rules enforced (beyond the syntax of the exposition format):
//  - metric names match [a-zA-Z_][a-zA-Z0-9_]*; ':' is reserved for
//    recording rules and refused;
//  - no family name ends in _bucket, _sum or _count, the suffixes of
//    histogram samples, so the sample names of two families never collide;
//  - counter names end in _total;
//  - label names match [a-zA-Z_][a-zA-Z0-9_]* and do not start with "__"
//    (reserved for Prometheus itself); "le" is reserved in histograms;
//  - label values and help texts are valid UTF-8.
// The project's gradwire_ prefix is a convention of the callers, not checked
// here.
//
// Thread safety: all functions are pure.
#ifndef GRADWIRE_COMMON_METRICS_NAMES_H_
#define GRADWIRE_COMMON_METRICS_NAMES_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gradwire::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as the # TYPE line spells it.
absl::string_view TypeName(MetricType type);

// Label name -> value. Ordered, so that a label set is a map key and
// samples come out sorted by label name.
using Labels = std::map<std::string, std::string>;

// OK, or INVALID_ARGUMENT naming `name` and the rule it breaks.
absl::Status ValidateMetricName(absl::string_view name, MetricType type);

// OK, or INVALID_ARGUMENT naming `name` and the rule it breaks.
absl::Status ValidateLabelName(absl::string_view name, MetricType type);

// Every name with ValidateLabelName, every value is UTF-8.
absl::Status ValidateLabels(const Labels& labels, MetricType type);

// OK when `text` is well-formed UTF-8 (no overlong forms, no surrogates).
absl::Status ValidateUtf8(absl::string_view text, absl::string_view what);

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_NAMES_H_
