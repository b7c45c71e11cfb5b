#include "cli/cluster_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/run_directory.h"
#include "common/format/human_bytes.h"

namespace gradwire::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kRequiredNumbers[] = {
    "test_accuracy", "steps",        "wall_seconds",
    "pushed_bytes",  "pulled_bytes", "dense_equivalent_bytes"};

enum class Rule { kSum, kMax, kFirst, kDrop };

Rule RuleFor(absl::string_view key) {
  if (key == "worker_id") return Rule::kDrop;
  // A setting, not a count.
  if (key == "push_bucket_bytes") return Rule::kFirst;
  // The CPU account: seconds, steps and scopes of every worker (the ratio
  // and the activities are recomputed from the sums: AddCpuFigures).
  if (absl::StartsWith(key, "cpu_")) return Rule::kSum;
  if (absl::EndsWith(key, "_bytes") || key == "retries") return Rule::kSum;
  if (key == "steps" || key == "steps_run" || key == "max_step_lead" ||
      absl::EndsWith(key, "_seconds")) {
    return Rule::kMax;
  }
  return Rule::kFirst;
}

// The member `key` of `object` when it is a finite number (the parser reads
// 1e999 as infinity), else nullptr.
const Json* NumberMember(const Json& object, absl::string_view key) {
  const auto it = object.find(std::string(key));
  if (it == object.end() || !it->is_number() ||
      !std::isfinite(it->get<double>())) {
    return nullptr;
  }
  return &*it;
}

double NumberOf(const Json& object, absl::string_view key) {
  const Json* v = NumberMember(object, key);
  return v == nullptr ? 0 : v->get<double>();
}

// Whether a worker's summary says it ran no evaluation (--evaluate=false);
// a summary without the key is taken to have evaluated.
bool SaysNotEvaluated(const Json& summary) {
  const auto it = summary.find("evaluated");
  return it != summary.end() && it->is_boolean() && !it->get<bool>();
}

absl::Status CheckRequired(const std::vector<Json>& workers) {
  for (size_t i = 0; i < workers.size(); ++i) {
    for (absl::string_view key : kRequiredNumbers) {
      // Only worker 0 must have evaluated, unless it was told not to.
      if (key == "test_accuracy" && (i > 0 || SaysNotEvaluated(workers[i]))) {
        continue;
      }
      if (NumberMember(workers[i], key) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the summary of worker ", i, " has no number \"", key, "\""));
      }
    }
  }
  return absl::OkStatus();
}

Json Real(double value) { return std::isfinite(value) ? value : 0.0; }

// Sums exactly while every value is an unsigned integer.
Json Sum(const std::vector<const Json*>& values) {
  uint64_t total = 0;
  double real_total = 0;
  bool integral = true;
  for (const Json* v : values) {
    integral = integral && v->is_number_unsigned();
    if (integral) total += v->get<uint64_t>();
    real_total += v->get<double>();
  }
  return integral ? Json(total) : Real(real_total);
}

Json Max(const std::vector<const Json*>& values) {
  return **std::max_element(values.begin(), values.end(),
                            [](const Json* a, const Json* b) {
                              return a->get<double>() < b->get<double>();
                            });
}

// Never throws: text that is not valid UTF-8 is written with U+FFFD.
std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// One line, {"key": value, ...}: nlohmann's compact dump has no spaces after
// ':' and ',', which the line-based readers of summaries expect.
std::string SummaryLine(const Json& summary) {
  std::string out = "{";
  for (const auto& member : summary.items()) {
    if (out.size() > 1) out += ", ";
    absl::StrAppend(&out, Dump(member.key()), ": ", Dump(member.value()));
  }
  return out + "}\n";
}

// Wire bytes, as the workers' kernels counted them (TCP_INFO), beside the
// payload (serialized messages) and their ratio: `measure` "wire" for the
// TCP stream bytes, "packet" for those plus the IP and TCP headers. They
// count only when every worker knew its own: a partial sum would
// understate the wire, so then the cluster's are null. Summaries without
// them (older workers) leave the cluster without them too.
void AddWireFigures(const std::vector<Json>& workers, absl::string_view measure,
                    Json* cluster) {
  const std::string sent = absl::StrCat(measure, "_sent_bytes");
  const std::string received = absl::StrCat(measure, "_received_bytes");
  const std::string ratio = absl::StrCat(measure, "_payload_ratio");
  if (!workers[0].contains(sent)) return;
  for (const Json& w : workers) {
    if (NumberMember(w, sent) == nullptr ||
        NumberMember(w, received) == nullptr) {
      (*cluster)[sent] = nullptr;
      (*cluster)[received] = nullptr;
      (*cluster)[ratio] = nullptr;
      return;
    }
  }
  const double wire = NumberOf(*cluster, sent) + NumberOf(*cluster, received);
  const double payload = NumberOf(*cluster, "payload_sent_bytes") +
                         NumberOf(*cluster, "payload_received_bytes");
  (*cluster)[ratio] = Real(payload > 0 ? wire / payload : 0);
}

// "; 1.41x with IP/TCP headers" for the wire line; empty without packet
// figures (older workers).
std::string PacketRatioText(const Json& cluster) {
  if (!cluster.contains("packet_payload_ratio")) return "";
  if (NumberMember(cluster, "packet_payload_ratio") == nullptr) {
    return "; IP/TCP headers unknown";
  }
  return absl::StrFormat("; %.2fx with IP/TCP headers",
                         NumberOf(cluster, "packet_payload_ratio"));
}

// "  wire bytes ..." for the report; empty without wire figures.
std::string WireLine(const Json& cluster) {
  if (!cluster.contains("wire_sent_bytes")) return "";
  if (NumberMember(cluster, "wire_sent_bytes") == nullptr) {
    return "  wire bytes     unknown (a transport without TCP_INFO)\n";
  }
  const auto bytes = [&cluster](absl::string_view key) {
    return HumanBytes(static_cast<uint64_t>(NumberOf(cluster, key)));
  };
  return absl::StrFormat(
      "  wire bytes     %s sent, %s received (TCP), %.2fx the payload of "
      "%s sent, %s received%s\n",
      bytes("wire_sent_bytes"), bytes("wire_received_bytes"),
      NumberOf(cluster, "wire_payload_ratio"), bytes("payload_sent_bytes"),
      bytes("payload_received_bytes"), PacketRatioText(cluster));
}

absl::StatusOr<Json> ParseSummary(const std::string& text) {
  if (text.empty()) {
    return absl::InvalidArgumentError("the file is missing or empty");
  }
  Json summary = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded()) {
    return absl::InvalidArgumentError("the file is not valid JSON");
  }
  if (!summary.is_object()) {
    return absl::InvalidArgumentError("the file holds no JSON object");
  }
  return summary;
}

// The CPU account of every worker together: its activities summed, and
// communication against compute. Summaries without it (older workers, or
// a worker without one) leave the cluster's as worker 0's.
void AddCpuFigures(const std::vector<Json>& workers, Json* cluster) {
  Json sums = Json::object();
  for (const Json& w : workers) {
    const auto it = w.find("cpu_seconds_by_activity");
    if (it == w.end() || !it->is_object()) return;
    for (const auto& activity : it->items()) {
      if (!activity.value().is_number()) continue;
      const double before = NumberOf(sums, activity.key());
      sums[activity.key()] = before + activity.value().get<double>();
    }
  }
  (*cluster)["cpu_seconds_by_activity"] = sums;
  const double compute = NumberOf(*cluster, "cpu_compute_seconds");
  (*cluster)["cpu_communication_ratio"] = Real(
      compute > 0 ? NumberOf(*cluster, "cpu_communication_seconds") / compute
                  : 0);
}

// "  worker CPU ..." for the report: communication against compute per
// step (the mean over workers), and the activities, largest first; empty
// without the account.
std::string CpuLine(const Json& cluster) {
  const double steps = NumberOf(cluster, "cpu_steps");
  const auto it = cluster.find("cpu_seconds_by_activity");
  if (steps <= 0 || it == cluster.end() || !it->is_object()) return "";
  std::vector<std::pair<double, std::string>> activities;
  for (const auto& activity : it->items()) {
    if (activity.value().is_number() && activity.value().get<double>() > 0) {
      activities.emplace_back(activity.value().get<double>(), activity.key());
    }
  }
  std::sort(activities.rbegin(), activities.rend());
  std::string parts;
  for (const auto& [seconds, name] : activities) {
    absl::StrAppend(&parts, parts.empty() ? "" : ", ", name, " ",
                    absl::StrFormat("%.2f", 1e3 * seconds / steps));
  }
  return absl::StrFormat(
      "  worker CPU     communication %.2f ms/step against compute %.2f "
      "ms/step (%.1f%%)\n"
      "                 by activity, ms/step: %s\n",
      1e3 * NumberOf(cluster, "cpu_communication_seconds") / steps,
      1e3 * NumberOf(cluster, "cpu_compute_seconds") / steps,
      100 * NumberOf(cluster, "cpu_communication_ratio"), parts);
}

// What the workers sent and received before step 0, and the slowest
// worker's start-up; empty for summaries without it (older workers).
std::string StartupLine(const Json& cluster) {
  if (NumberMember(cluster, "startup_sent_bytes") == nullptr) return "";
  return absl::StrFormat(
      "  start-up       %s sent, %s received before step 0, %.1f s (slowest "
      "worker)\n",
      HumanBytes(
          static_cast<uint64_t>(NumberOf(cluster, "startup_sent_bytes"))),
      HumanBytes(
          static_cast<uint64_t>(NumberOf(cluster, "startup_received_bytes"))),
      NumberOf(cluster, "startup_seconds"));
}

}  // namespace

absl::StatusOr<Json> CombineWorkerSummaries(const std::vector<Json>& workers,
                                            int shards) {
  if (workers.empty()) return absl::InvalidArgumentError("no worker summary");
  if (absl::Status s = CheckRequired(workers); !s.ok()) return s;
  Json cluster = Json::object();
  for (const auto& member : workers[0].items()) {
    const std::string& key = member.key();
    const Rule rule = RuleFor(key);
    if (rule == Rule::kDrop) continue;
    std::vector<const Json*> values;
    for (const Json& w : workers) {
      if (const Json* v = NumberMember(w, key); v != nullptr) {
        values.push_back(v);
      }
    }
    if (rule == Rule::kFirst || values.size() != workers.size()) {
      cluster[key] = member.value();
    } else {
      cluster[key] = rule == Rule::kSum ? Sum(values) : Max(values);
    }
  }
  const double pushed = NumberOf(cluster, "pushed_bytes");
  const double pulled = NumberOf(cluster, "pulled_bytes");
  const double dense = NumberOf(cluster, "dense_equivalent_bytes");
  cluster["workers"] = static_cast<uint64_t>(workers.size());
  cluster["shards"] = shards;
  cluster["compression_ratio"] = Real(pushed > 0 ? dense / pushed : 0);
  // Both ways: a dense exchange pulls each step what it pushes, the fp32
  // weights of every chunk (Init excluded on both sides).
  cluster["total_compression_ratio"] =
      Real(pushed + pulled > 0 ? 2 * dense / (pushed + pulled) : 0);
  AddWireFigures(workers, "wire", &cluster);
  AddWireFigures(workers, "packet", &cluster);
  AddCpuFigures(workers, &cluster);
  return cluster;
}

std::string ClusterReport(const Json& cluster, absl::Duration elapsed,
                          absl::string_view tool) {
  const auto bytes = [&cluster](absl::string_view key) {
    return HumanBytes(static_cast<uint64_t>(NumberOf(cluster, key)));
  };
  const std::string accuracy =
      NumberMember(cluster, "test_accuracy") != nullptr
          ? absl::StrFormat("%.4f (worker 0)",
                            NumberOf(cluster, "test_accuracy"))
          : "not evaluated";
  // Summaries without the split (older workers) count all as training.
  const double train = NumberMember(cluster, "train_seconds") != nullptr
                           ? NumberOf(cluster, "train_seconds")
                           : NumberOf(cluster, "wall_seconds");
  return absl::StrFormat(
      "%s: %d workers, %d shards, %d steps\n"
      "  test accuracy  %s\n"
      "  pushed         %s (dense fp32 would be %s, %.1fx less)\n"
      "  pulled         %s (both ways %.1fx less than dense push + pull)\n"
      "%s"
      "%s"
      "%s"
      "  wall time      %.1f s training, %.1f s evaluation (slowest "
      "worker), %.1f s in all\n",
      tool, static_cast<int64_t>(NumberOf(cluster, "workers")),
      static_cast<int64_t>(NumberOf(cluster, "shards")),
      static_cast<int64_t>(NumberOf(cluster, "steps")), accuracy,
      bytes("pushed_bytes"), bytes("dense_equivalent_bytes"),
      NumberOf(cluster, "compression_ratio"), bytes("pulled_bytes"),
      NumberOf(cluster, "total_compression_ratio"), WireLine(cluster),
      StartupLine(cluster), CpuLine(cluster), train,
      NumberOf(cluster, "eval_seconds"), absl::ToDoubleSeconds(elapsed));
}

absl::StatusOr<std::string> SummariseCluster(
    const std::vector<std::string>& worker_summaries, int shards,
    const std::string& summary_json, absl::Duration elapsed,
    absl::string_view tool) {
  std::vector<Json> summaries;
  for (const std::string& path : worker_summaries) {
    absl::StatusOr<Json> summary = ParseSummary(ReadFile(path));
    if (!summary.ok()) {
      return absl::DataLossError(
          absl::StrCat("cannot read ", path, ": ", summary.status().message()));
    }
    summaries.push_back(std::move(*summary));
  }
  absl::StatusOr<Json> cluster = CombineWorkerSummaries(summaries, shards);
  if (!cluster.ok()) return cluster.status();
  if (!summary_json.empty()) {
    std::ofstream out(summary_json);
    out << SummaryLine(*cluster);
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", summary_json));
    }
  }
  return ClusterReport(*cluster, elapsed, tool);
}

}  // namespace gradwire::cli
