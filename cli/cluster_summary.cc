#include "cli/cluster_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/run_directory.h"
#include "common/format/human_bytes.h"

namespace gradwire::cli {
namespace {

constexpr absl::string_view kRequiredNumbers[] = {
    "test_accuracy", "steps",        "wall_seconds",
    "pushed_bytes",  "pulled_bytes", "dense_equivalent_bytes"};

enum class Rule { kSum, kMax, kFirst, kDrop };

Rule RuleFor(absl::string_view key) {
  if (key == "worker_id") return Rule::kDrop;
  if (absl::EndsWith(key, "_bytes") || key == "retries") return Rule::kSum;
  if (key == "steps" || key == "steps_run" || key == "max_step_lead" ||
      absl::EndsWith(key, "_seconds")) {
    return Rule::kMax;
  }
  return Rule::kFirst;
}

absl::Status CheckRequired(const std::vector<FlatJson>& workers) {
  for (size_t i = 0; i < workers.size(); ++i) {
    for (absl::string_view key : kRequiredNumbers) {
      // Only worker 0 must have evaluated.
      if (i > 0 && key == "test_accuracy") continue;
      const JsonValue* v = FindMember(workers[i], key);
      if (v == nullptr || v->kind != JsonValue::Kind::kNumber) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the summary of worker ", i, " has no number \"", key, "\""));
      }
    }
  }
  return absl::OkStatus();
}

// Sums exactly while every value is an unsigned integer.
JsonValue Sum(const std::vector<const JsonValue*>& values) {
  uint64_t total = 0;
  double real_total = 0;
  bool integral = true;
  for (const JsonValue* v : values) {
    uint64_t n = 0;
    integral = integral && absl::SimpleAtoi(v->text, &n);
    total += n;
    real_total += v->number;
  }
  return integral ? JsonValue::Integer(total) : JsonValue::Real(real_total);
}

JsonValue Max(const std::vector<const JsonValue*>& values) {
  return **std::max_element(values.begin(), values.end(),
                            [](const JsonValue* a, const JsonValue* b) {
                              return a->number < b->number;
                            });
}

double NumberOf(const FlatJson& object, absl::string_view key) {
  const JsonValue* v = FindMember(object, key);
  return v == nullptr ? 0 : v->number;
}

}  // namespace

absl::StatusOr<FlatJson> CombineWorkerSummaries(
    const std::vector<FlatJson>& workers, int shards) {
  if (workers.empty()) return absl::InvalidArgumentError("no worker summary");
  if (absl::Status s = CheckRequired(workers); !s.ok()) return s;
  FlatJson cluster;
  for (const auto& [key, first] : workers[0]) {
    const Rule rule = RuleFor(key);
    if (rule == Rule::kDrop) continue;
    std::vector<const JsonValue*> values;
    for (const FlatJson& w : workers) {
      const JsonValue* v = FindMember(w, key);
      if (v != nullptr && v->kind == JsonValue::Kind::kNumber)
        values.push_back(v);
    }
    if (rule == Rule::kFirst || values.size() != workers.size()) {
      cluster.emplace_back(key, first);
    } else {
      cluster.emplace_back(key, rule == Rule::kSum ? Sum(values) : Max(values));
    }
  }
  const double pushed = NumberOf(cluster, "pushed_bytes");
  const double dense = NumberOf(cluster, "dense_equivalent_bytes");
  cluster.emplace_back("workers", JsonValue::Integer(workers.size()));
  cluster.emplace_back("shards", JsonValue::Integer(shards));
  cluster.emplace_back("compression_ratio",
                       JsonValue::Real(pushed > 0 ? dense / pushed : 0));
  return cluster;
}

std::string ClusterReport(const FlatJson& cluster, absl::Duration elapsed) {
  const auto bytes = [&cluster](absl::string_view key) {
    return HumanBytes(static_cast<uint64_t>(NumberOf(cluster, key)));
  };
  return absl::StrFormat(
      "gradwire local: %d workers, %d shards, %d steps\n"
      "  test accuracy  %.4f (worker 0)\n"
      "  pushed         %s (dense fp32 would be %s, %.1fx less)\n"
      "  pulled         %s\n"
      "  wall time      %.1f s training (slowest worker), %.1f s in all\n",
      static_cast<int64_t>(NumberOf(cluster, "workers")),
      static_cast<int64_t>(NumberOf(cluster, "shards")),
      static_cast<int64_t>(NumberOf(cluster, "steps")),
      NumberOf(cluster, "test_accuracy"), bytes("pushed_bytes"),
      bytes("dense_equivalent_bytes"), NumberOf(cluster, "compression_ratio"),
      bytes("pulled_bytes"), NumberOf(cluster, "wall_seconds"),
      absl::ToDoubleSeconds(elapsed));
}

absl::StatusOr<std::string> SummariseCluster(
    const std::vector<std::string>& worker_summaries, int shards,
    const std::string& summary_json, absl::Duration elapsed) {
  std::vector<FlatJson> summaries;
  for (const std::string& path : worker_summaries) {
    absl::StatusOr<FlatJson> summary = ParseFlatJson(ReadFile(path));
    if (!summary.ok()) {
      return absl::DataLossError(
          absl::StrCat("cannot read ", path, ": ", summary.status().message()));
    }
    summaries.push_back(std::move(*summary));
  }
  absl::StatusOr<FlatJson> cluster = CombineWorkerSummaries(summaries, shards);
  if (!cluster.ok()) return cluster.status();
  if (!summary_json.empty()) {
    std::ofstream out(summary_json);
    out << FlatJsonToString(*cluster);
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", summary_json));
    }
  }
  return ClusterReport(*cluster, elapsed);
}

}  // namespace gradwire::cli
