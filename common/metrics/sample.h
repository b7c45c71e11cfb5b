// What a scrape collects: plain data, decoupled from the live metrics so
// that the text format can be produced (and tested) from it alone.
#ifndef GRADWIRE_COMMON_METRICS_SAMPLE_H_
#define GRADWIRE_COMMON_METRICS_SAMPLE_H_

#include <string>
#include <utility>
#include <vector>

#include "common/metrics/names.h"

namespace gradwire::metrics {

// One line of the exposition: name{labels} value.
struct Sample {
  // The full sample name: the family name, or for histograms the family
  // name plus _bucket, _sum or _count.
  std::string name;
  // In the order they are written (sorted by name, "le" last).
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0.0;
};

// One metric family: its # HELP and # TYPE lines and its samples.
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_SAMPLE_H_
