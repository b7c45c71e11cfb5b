#include "bench/common/report.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/compress/kernels.h"

namespace gradwire::bench {
namespace {

constexpr char kNotes[] =
    "seconds: median of >= 3 timed calls after one warm-up, each call "
    "CompressWithFeedback with one FeedbackState kept across calls and the "
    "same gaussian gradient; torch_topk: from_blob(...).abs().topk(k, "
    "sorted=false), abs and topk timed together; vs_torch_topk: torch / "
    "ours at the same numel and ratio, at ratio 0.01 for rows without a "
    "ratio; vs_memcpy: ours / memcpy (memcpy on one thread, also for rows "
    "with threads > 1); chunk_elements > 0: the buffer in chunks of "
    "chunk_elements, one FeedbackState per chunk, compressed on `threads` "
    "threads (1: one after another); chunk_elements 0: one call; "
    "threshold: the threshold is the "
    "(1 - ratio) quantile of |gradient|, so the first call keeps ~ratio "
    "(error feedback then raises the density, see achieved_ratio); "
    "wire_bytes_per_selected: ChunkData bytes / selected elements, values "
    "fp16 for sparsifiers and the compressor's own precision otherwise; "
    "_fp32: the same chunk with fp32 values";

std::string Optional(const std::optional<double>& v,
                     const absl::FormatSpec<double>& format) {
  return v.has_value() ? absl::StrFormat(format, *v) : "-";
}

using Json = nlohmann::ordered_json;

// Six significant digits, or null when absent.
Json Figure(const std::optional<double>& v) {
  return v.has_value() ? Json(Rounded(*v, "%.6g")) : Json(nullptr);
}

Json RowJson(const ResultRow& r) {
  return {
      {"compressor", r.compressor},
      {"numel", r.numel},
      {"ratio", Figure(r.ratio)},
      {"achieved_ratio", Figure(r.achieved_ratio)},
      {"seconds", Rounded(r.seconds, "%.6g")},
      {"reps", r.reps},
      {"threads", r.threads},
      {"chunk_elements", r.chunk_elements},
      {"vs_torch_topk", Figure(r.vs_torch_topk)},
      {"vs_memcpy", Figure(r.vs_memcpy)},
      {"wire_bytes",
       r.wire_bytes.has_value() ? Json(*r.wire_bytes) : Json(nullptr)},
      {"wire_bytes_per_selected", Figure(r.wire_bytes_per_selected)},
      {"wire_bytes_per_selected_fp32", Figure(r.wire_bytes_per_selected_fp32)}};
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
  host.instruction_set = std::string(
      compress_kernels::InstructionSetName(compress_kernels::Kernels().isa));
  return host;
}

void PrintTableHeader(std::FILE* out) {
  std::fprintf(out, "%-11s %9s %6s %3s %8s %8s %10s %5s %9s %9s %9s %9s\n",
               "compressor", "numel", "ratio", "thr", "chunk", "achieved", "ms",
               "reps", "vs_torch", "vs_memcpy", "B/sel", "B/sel32");
}

void PrintTableRow(const ResultRow& r, std::FILE* out) {
  std::fprintf(out, "%-11s %9llu %6s %3d %8s %8s %10.3f %5d %9s %9s %9s %9s\n",
               r.compressor.c_str(), static_cast<unsigned long long>(r.numel),
               Optional(r.ratio, "%g").c_str(), r.threads,
               r.chunk_elements == 0
                   ? "-"
                   : absl::StrFormat("%llu", static_cast<unsigned long long>(
                                                 r.chunk_elements))
                         .c_str(),
               Optional(r.achieved_ratio, "%.4f").c_str(), r.seconds * 1e3,
               r.reps, Optional(r.vs_torch_topk, "%.2fx").c_str(),
               Optional(r.vs_memcpy, "%.2fx").c_str(),
               Optional(r.wire_bytes_per_selected, "%.3f").c_str(),
               Optional(r.wire_bytes_per_selected_fp32, "%.3f").c_str());
  std::fflush(out);
}

absl::Status WriteJson(const std::string& path, const HostInfo& host,
                       int torch_threads, const std::vector<ResultRow>& rows) {
  Json results = Json::array();
  for (const ResultRow& r : rows) results.push_back(RowJson(r));
  const Json report = {{"torch_threads", torch_threads},
                       {"host", HostJson(host)},
                       {"notes", kNotes},
                       {"results", std::move(results)}};
  if (!WriteJsonFile(path, report)) {
    return absl::UnavailableError(
        absl::StrCat("cannot write JSON results to '", path, "'"));
  }
  return absl::OkStatus();
}

Json HostJson(const HostInfo& host) {
  return {{"hostname", host.hostname},
          {"cpu", host.cpu_model},
          {"hardware_threads", host.hardware_threads},
          {"instruction_set", host.instruction_set}};
}

double Rounded(double value, const absl::FormatSpec<double>& format) {
  double rounded = value;
  return absl::SimpleAtod(absl::StrFormat(format, value), &rounded) ? rounded
                                                                    : value;
}

bool WriteJsonFile(const std::string& path, const Json& report) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << report.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
  file.close();
  return static_cast<bool>(file);
}

}  // namespace gradwire::bench
