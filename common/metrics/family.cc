#include "common/metrics/family.h"

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/text_format.h"

namespace gradwire::metrics {
namespace {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

LabelPairs ToPairs(const Labels& labels) {
  return LabelPairs(labels.begin(), labels.end());
}

std::vector<std::string> NamesOf(const Labels& labels) {
  std::vector<std::string> names;
  for (const auto& [name, value] : labels) names.push_back(name);
  return names;
}

void AppendSamples(const std::string& name, const Labels& labels,
                   const Counter& counter, FamilySnapshot* out) {
  out->samples.push_back({name, ToPairs(labels), counter.Value()});
}

void AppendSamples(const std::string& name, const Labels& labels,
                   const Gauge& gauge, FamilySnapshot* out) {
  out->samples.push_back({name, ToPairs(labels), gauge.Value()});
}

// name_bucket{...,le="b"} per bound and le="+Inf", then name_sum and
// name_count.
void AppendSamples(const std::string& name, const Labels& labels,
                   const Histogram& histogram, FamilySnapshot* out) {
  const HistogramSnapshot snapshot = histogram.Snapshot();
  const absl::Span<const double> bounds = histogram.bounds();
  const std::string bucket_name = absl::StrCat(name, "_bucket");
  for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
    LabelPairs with_le = ToPairs(labels);
    with_le.emplace_back(
        "le", i < bounds.size() ? FormatValue(bounds[i]) : std::string("+Inf"));
    out->samples.push_back({bucket_name, std::move(with_le),
                            static_cast<double>(snapshot.cumulative[i])});
  }
  out->samples.push_back(
      {absl::StrCat(name, "_sum"), ToPairs(labels), snapshot.sum});
  out->samples.push_back({absl::StrCat(name, "_count"), ToPairs(labels),
                          static_cast<double>(snapshot.cumulative.back())});
}

}  // namespace

template <typename T>
Family<T>::Family(std::string name, MetricType type, std::vector<double> bounds)
    : name_(std::move(name)), type_(type), bounds_(std::move(bounds)) {}

template <typename T>
std::unique_ptr<T> Family<T>::NewChild() const {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(bounds_);
  } else {
    return std::make_unique<T>();
  }
}

template <typename T>
absl::Status Family<T>::CheckLabelNames(const Labels& labels) const {
  if (absl::Status s = ValidateLabels(labels, type_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": ", s.message()));
  }
  if (label_names_.has_value() && *label_names_ != NamesOf(labels)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": label names {", absl::StrJoin(NamesOf(labels), ","),
        "} differ from the family's {", absl::StrJoin(*label_names_, ","),
        "}"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T*> Family<T>::TryAdd(const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto it = children_.find(labels);
  if (it != children_.end()) return it->second.get();
  if (absl::Status s = CheckLabelNames(labels); !s.ok()) return s;
  if (!label_names_.has_value()) label_names_ = NamesOf(labels);
  return children_.emplace(labels, NewChild()).first->second.get();
}

template <typename T>
T& Family<T>::Add(const Labels& labels) {
  absl::StatusOr<T*> child = TryAdd(labels);
  if (!child.ok()) {
    std::fprintf(stderr, "gradwire metrics: %s\n",
                 child.status().ToString().c_str());
    std::abort();
  }
  return **child;
}

template <typename T>
void Family<T>::Collect(FamilySnapshot* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, child] : children_) {
    AppendSamples(out->name, labels, *child, out);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

}  // namespace gradwire::metrics
