#include "bench/report.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "bench/json_text.h"

namespace gradwire::bench {
namespace {

constexpr char kNotes[] =
    "seconds: median of >= 3 timed calls after one warm-up, each call "
    "CompressWithFeedback with one FeedbackState kept across calls and the "
    "same gaussian gradient; torch_topk: from_blob(...).abs().topk(k, "
    "sorted=false), abs and topk timed together; vs_torch_topk: torch / "
    "ours at the same numel and ratio, at ratio 0.01 for rows without a "
    "ratio; vs_memcpy: ours / memcpy; threshold: the threshold is the "
    "(1 - ratio) quantile of |gradient|, so the first call keeps ~ratio "
    "(error feedback then raises the density, see achieved_ratio); "
    "wire_bytes_per_selected: ChunkData bytes / selected elements, values "
    "fp16 for sparsifiers and the compressor's own precision otherwise; "
    "_fp32: the same chunk with fp32 values";

std::string Optional(const std::optional<double>& v,
                     const absl::FormatSpec<double>& format) {
  return v.has_value() ? absl::StrFormat(format, *v) : "-";
}

std::string JsonNumber(const std::optional<double>& v) {
  return v.has_value() ? absl::StrFormat("%.6g", *v) : "null";
}

std::string RowJson(const ResultRow& r) {
  const std::optional<double> wire =
      r.wire_bytes.has_value()
          ? std::optional<double>(static_cast<double>(*r.wire_bytes))
          : std::nullopt;
  return absl::StrFormat(
      "    {\"compressor\": %s, \"numel\": %d, \"ratio\": %s, "
      "\"achieved_ratio\": %s, \"seconds\": %.6g, \"reps\": %d, "
      "\"vs_torch_topk\": %s, \"vs_memcpy\": %s, \"wire_bytes\": %s, "
      "\"wire_bytes_per_selected\": %s, "
      "\"wire_bytes_per_selected_fp32\": %s}",
      JsonString(r.compressor), r.numel, JsonNumber(r.ratio),
      JsonNumber(r.achieved_ratio), r.seconds, r.reps,
      JsonNumber(r.vs_torch_topk), JsonNumber(r.vs_memcpy), JsonNumber(wire),
      JsonNumber(r.wire_bytes_per_selected),
      JsonNumber(r.wire_bytes_per_selected_fp32));
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "model name")) {
      const size_t colon = rest.find(':');
      if (colon != absl::string_view::npos) {
        return std::string(absl::StripAsciiWhitespace(rest.substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

}  // namespace

HostInfo CurrentHost() {
  HostInfo host;
  char name[256] = {};
  host.hostname = gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
  host.cpu_model = CpuModel();
  host.hardware_threads = std::thread::hardware_concurrency();
  return host;
}

void PrintTableHeader(std::FILE* out) {
  std::fprintf(out, "%-11s %9s %6s %8s %10s %5s %9s %9s %9s %9s\n",
               "compressor", "numel", "ratio", "achieved", "ms", "reps",
               "vs_torch", "vs_memcpy", "B/sel", "B/sel32");
}

void PrintTableRow(const ResultRow& r, std::FILE* out) {
  std::fprintf(out, "%-11s %9llu %6s %8s %10.3f %5d %9s %9s %9s %9s\n",
               r.compressor.c_str(), static_cast<unsigned long long>(r.numel),
               Optional(r.ratio, "%g").c_str(),
               Optional(r.achieved_ratio, "%.4f").c_str(), r.seconds * 1e3,
               r.reps, Optional(r.vs_torch_topk, "%.2fx").c_str(),
               Optional(r.vs_memcpy, "%.2fx").c_str(),
               Optional(r.wire_bytes_per_selected, "%.3f").c_str(),
               Optional(r.wire_bytes_per_selected_fp32, "%.3f").c_str());
  std::fflush(out);
}

absl::Status WriteJson(const std::string& path, const HostInfo& host,
                       int torch_threads, const std::vector<ResultRow>& rows) {
  std::vector<std::string> results;
  results.reserve(rows.size());
  for (const ResultRow& r : rows) results.push_back(RowJson(r));
  const std::string json = absl::StrFormat(
      "{\n  \"torch_threads\": %d,\n  \"host\": {\"hostname\": %s, \"cpu\": "
      "%s, \"hardware_threads\": %d},\n  \"notes\": %s,\n  \"results\": "
      "[\n%s\n  ]\n}\n",
      torch_threads, JsonString(host.hostname), JsonString(host.cpu_model),
      host.hardware_threads, JsonString(kNotes), absl::StrJoin(results, ",\n"));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << json;
  file.close();
  if (!file) {
    return absl::UnavailableError(
        absl::StrCat("cannot write JSON results to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
