// The Prometheus text exposition format, version 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/
//
//   # HELP <name> <help, with \ and newline escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \ " and newline escaped>",...} <value>
//
// Thread safety: all functions are pure.
#ifndef GRADWIRE_COMMON_METRICS_TEXT_FORMAT_H_
#define GRADWIRE_COMMON_METRICS_TEXT_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/metrics/sample.h"

namespace gradwire::metrics {

// The Content-Type of a response that carries SerializeText's output.
inline constexpr absl::string_view kTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// A sample value as Prometheus parses it: "+Inf", "-Inf", "NaN"; integers
// of magnitude below 2^53 in plain digits ("1000000", not "1e+06"); other
// values in the shortest form that reads back to the same double.
std::string FormatValue(double value);

// A label value with backslash, double quote and newline escaped (\\, \",
// \n); every other byte is kept.
std::string EscapeLabelValue(absl::string_view value);

// A HELP text with backslash and newline escaped (\\, \n); double quotes
// stay as they are, as the format specifies.
std::string EscapeHelp(absl::string_view help);

// The exposition of `families`, in the given order. A family without
// samples is left out entirely (no HELP or TYPE line for nothing).
std::string SerializeText(absl::Span<const FamilySnapshot> families);

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_TEXT_FORMAT_H_
