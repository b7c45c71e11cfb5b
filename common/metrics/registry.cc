#include "common/metrics/registry.h"

#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/metrics/histogram.h"

namespace gradwire::metrics {

// A family whose samples a callback computes at each Collect.
class CallbackFamily final : public Collectable {
 public:
  CallbackFamily(MetricType type, Callback collect)
      : type_(type), collect_(std::move(collect)) {}

  void Collect(FamilySnapshot* out) const override {
    CallbackSink sink(type_, out);
    collect_(sink);
  }

 private:
  const MetricType type_;
  const Callback collect_;
};

void CallbackSink::Add(const Labels& labels, double value) {
  if (!ValidateLabels(labels, type_).ok()) {
    assert(false && "CallbackSink::Add: invalid labels");
    return;
  }
  out_->samples.push_back({out_->name, {labels.begin(), labels.end()}, value});
}

CallbackRegistration::~CallbackRegistration() {
  registry_->RemoveCallback(name_, family_);
}

namespace {

absl::Status CheckOptions(MetricType type, const MetricOptions& options) {
  if (absl::Status s = ValidateMetricName(options.name, type); !s.ok()) {
    return s;
  }
  return ValidateUtf8(options.help, absl::StrCat("help of ", options.name));
}

}  // namespace

absl::StatusOr<Collectable*> Registry::FindIdentical(
    MetricType type, const MetricOptions& options,
    const std::vector<double>& bounds) const {
  const auto it = families_.find(options.name);
  if (it == families_.end()) return nullptr;
  const Entry& entry = it->second;
  const char* difference = nullptr;
  if (entry.is_callback) {
    difference = "a scrape-time callback";
  } else if (entry.type != type) {
    difference = "another type";
  } else if (entry.help != options.help) {
    difference = "another help text";
  } else if (entry.bounds != bounds) {
    difference = "other bucket bounds";
  }
  if (difference != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        "metric ", options.name, " is already registered with ", difference,
        " (", TypeName(entry.type), ": \"", entry.help, "\")"));
  }
  return entry.family.get();
}

template <typename T>
absl::StatusOr<Family<T>*> Registry::AddFamily(MetricType type,
                                               const MetricOptions& options,
                                               std::vector<double> bounds) {
  if (absl::Status s = CheckOptions(type, options); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Collectable*> existing = FindIdentical(type, options, bounds);
  if (!existing.ok()) return existing.status();
  if (*existing != nullptr) return static_cast<Family<T>*>(*existing);
  auto family =
      std::unique_ptr<Family<T>>(new Family<T>(options.name, type, bounds));
  Family<T>* result = family.get();
  families_.emplace(options.name, Entry{type, options.help, std::move(bounds),
                                        false, std::move(family)});
  return result;
}

absl::StatusOr<Family<Counter>*> Registry::AddCounterFamily(
    const MetricOptions& options) {
  return AddFamily<Counter>(MetricType::kCounter, options, {});
}

absl::StatusOr<Family<Gauge>*> Registry::AddGaugeFamily(
    const MetricOptions& options) {
  return AddFamily<Gauge>(MetricType::kGauge, options, {});
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogramFamily(
    const MetricOptions& options, std::vector<double> bucket_bounds) {
  if (absl::Status s = ValidateBucketBounds(bucket_bounds); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, ": ", s.message()));
  }
  return AddFamily<Histogram>(MetricType::kHistogram, options,
                              std::move(bucket_bounds));
}

absl::StatusOr<std::unique_ptr<CallbackRegistration>> Registry::AddCallback(
    MetricType type, const MetricOptions& options, Callback collect) {
  if (type == MetricType::kHistogram) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.name, ": callbacks expose counters or gauges, not histograms"));
  }
  if (absl::Status s = CheckOptions(type, options); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (families_.count(options.name) != 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("metric ", options.name, " is already registered"));
  }
  auto family = std::make_unique<CallbackFamily>(type, std::move(collect));
  const Collectable* key = family.get();
  families_.emplace(options.name,
                    Entry{type, options.help, {}, true, std::move(family)});
  return std::unique_ptr<CallbackRegistration>(
      new CallbackRegistration(this, options.name, key));
}

void Registry::RemoveCallback(const std::string& name,
                              const Collectable* family) {
  absl::MutexLock lock(&mu_);
  const auto it = families_.find(name);
  if (it != families_.end() && it->second.family.get() == family) {
    families_.erase(it);
  }
}

std::vector<FamilySnapshot> Registry::Collect() const {
  absl::MutexLock lock(&mu_);
  std::vector<FamilySnapshot> snapshots;
  snapshots.reserve(families_.size());
  for (const auto& [name, entry] : families_) {
    FamilySnapshot& snapshot = snapshots.emplace_back();
    snapshot.name = name;
    snapshot.help = entry.help;
    snapshot.type = entry.type;
    entry.family->Collect(&snapshot);
  }
  return snapshots;
}

}  // namespace gradwire::metrics
