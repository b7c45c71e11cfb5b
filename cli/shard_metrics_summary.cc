#include "cli/shard_metrics_summary.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/loopback_http.h"
#include "common/format/human_bytes.h"

namespace gradwire::cli {
namespace {

// One sample line: name{label="value",...} value [timestamp].
struct Sample {
  absl::string_view name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Reads `key="value"` pairs up to the closing '}', undoing the escapes of
// the exposition format (\\, \", \n). False on malformed text.
bool ParseLabels(absl::string_view* rest,
                 std::map<std::string, std::string>* labels) {
  for (;;) {
    *rest = absl::StripLeadingAsciiWhitespace(*rest);
    if (absl::ConsumePrefix(rest, "}")) return true;
    const size_t eq = rest->find("=\"");
    if (eq == absl::string_view::npos) return false;
    std::string key(absl::StripAsciiWhitespace(rest->substr(0, eq)));
    rest->remove_prefix(eq + 2);
    std::string value;
    size_t i = 0;
    for (; i < rest->size() && (*rest)[i] != '"'; ++i) {
      if ((*rest)[i] == '\\' && i + 1 < rest->size()) {
        ++i;
        value.push_back((*rest)[i] == 'n' ? '\n' : (*rest)[i]);
      } else {
        value.push_back((*rest)[i]);
      }
    }
    if (i == rest->size()) return false;
    rest->remove_prefix(i + 1);
    (*labels)[std::move(key)] = std::move(value);
    absl::ConsumePrefix(rest, ",");
  }
}

std::optional<Sample> ParseSample(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty() || line[0] == '#') return std::nullopt;
  Sample s;
  const size_t end = line.find_first_of("{ \t");
  if (end == absl::string_view::npos) return std::nullopt;
  s.name = line.substr(0, end);
  absl::string_view rest = line.substr(end);
  if (absl::ConsumePrefix(&rest, "{") && !ParseLabels(&rest, &s.labels)) {
    return std::nullopt;
  }
  rest = absl::StripLeadingAsciiWhitespace(rest);
  const absl::string_view value = rest.substr(0, rest.find_first_of(" \t"));
  if (!absl::SimpleAtod(value, &s.value)) return std::nullopt;
  return s;
}

bool HasLabels(const Sample& s,
               const std::map<std::string, std::string>& wanted) {
  for (const auto& [key, value] : wanted) {
    const auto it = s.labels.find(key);
    if (it == s.labels.end() || it->second != value) return false;
  }
  return true;
}

uint64_t Count(absl::string_view text, absl::string_view metric,
               const std::map<std::string, std::string>& labels) {
  return static_cast<uint64_t>(
      std::max(0.0, SumOfSamples(text, metric, labels).value_or(0)));
}

}  // namespace

std::optional<double> SumOfSamples(
    absl::string_view text, absl::string_view metric,
    const std::map<std::string, std::string>& labels) {
  std::optional<double> sum;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::optional<Sample> s = ParseSample(line);
    if (!s.has_value() || s->name != metric || !HasLabels(*s, labels)) {
      continue;
    }
    sum = sum.value_or(0) + s->value;
  }
  return sum;
}

ShardTotals TotalShardMetrics(const std::vector<std::string>& texts) {
  ShardTotals t;
  t.shards = static_cast<int>(texts.size());
  bool every_shard_has_steps = !texts.empty();
  for (const std::string& text : texts) {
    t.pushed_bytes +=
        Count(text, "gradwire_shard_received_bytes_total", {{"rpc", "push"}});
    t.pulled_bytes +=
        Count(text, "gradwire_shard_sent_bytes_total", {{"rpc", "pull"}});
    t.accepted_pushes +=
        Count(text, "gradwire_shard_pushes_total", {{"result", "accepted"}});
    const std::optional<double> clock =
        SumOfSamples(text, "gradwire_shard_chunk_clock_min");
    if (!clock.has_value()) {
      every_shard_has_steps = false;
      continue;
    }
    const int64_t steps = static_cast<int64_t>(*clock);
    t.steps = t.steps.has_value() ? std::min(*t.steps, steps) : steps;
  }
  if (!every_shard_has_steps) t.steps.reset();
  return t;
}

absl::StatusOr<ShardTotals> ScrapeShardTotals(const std::vector<int>& ports,
                                              absl::Duration timeout) {
  std::vector<std::string> texts;
  for (const int port : ports) {
    absl::StatusOr<HttpAnswer> answer =
        HttpGetLoopback(port, "/metrics", timeout);
    if (!answer.ok()) return answer.status();
    if (answer->status != 200) {
      return absl::UnavailableError(absl::StrCat(
          "GET http://127.0.0.1:", port, "/metrics: ", answer->status_line));
    }
    texts.push_back(std::move(answer->body));
  }
  return TotalShardMetrics(texts);
}

std::string ShardTotalsReport(absl::string_view tool, const ShardTotals& t,
                              int workers, absl::Duration elapsed) {
  const std::string steps =
      t.steps.has_value() ? absl::StrCat(*t.steps) : std::string("no");
  return absl::StrFormat(
      "%s: %d workers, %d shards, %s steps (from the shards' metrics; the "
      "workers wrote no summaries)\n"
      "  pushed         %s in %d accepted pushes (dense fp32: counted by "
      "workers only)\n"
      "  pulled         %s\n"
      "  wall time      %.1f s in all\n",
      tool, workers, t.shards, steps, HumanBytes(t.pushed_bytes),
      t.accepted_pushes, HumanBytes(t.pulled_bytes),
      absl::ToDoubleSeconds(elapsed));
}

}  // namespace gradwire::cli
