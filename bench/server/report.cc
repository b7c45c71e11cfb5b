#include "bench/server/report.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/shard/shard_metrics.h"

namespace gradwire::bench {
namespace {

constexpr char kNotes[] =
    "One shard, plain SGD, no pull compressor. Each push carries one chunk "
    "compressed by `compressor` (Top-K: at `density`, fp16 values, "
    "delta-varint indices; none: dense fp32; fp16: dense fp16), pre-built "
    "before timing. In a round every pusher pushes every chunk once at a "
    "fresh step; seconds: median of the timed calls of `rounds` rounds, "
    "after one warm-up call. asp: every push runs the optimizer on its chunk "
    "at once, so selected_per_s is aggregation throughput; bsp: pushes of a "
    "step are summed and the optimizer runs once per chunk and step, pushers "
    "wait for each other after each round. in_process: Shard::Push from one "
    "thread per pusher; grpc: the same over loopback gRPC, one channel and "
    "connection per pusher, one synchronous Push in flight per pusher (so "
    "every push pays a loopback round trip); tcp: the same serialized "
    "requests, "
    "length-prefixed, over one loopback TCP connection per pusher to a "
    "reader that discards them (the bound). dense_equiv_gb_per_s = "
    "selected_per_s / density * 4 / 1e9 (density: the fraction of elements "
    "the pushes carry, 1 when dense); vs_tcp = payload bytes/s / tcp "
    "payload bytes/s at the same pusher count; vs_tcp_dense = "
    "dense_equiv_gb_per_s * 1e9 / the payload bytes/s of raw TCP carrying the "
    "dense fp32 gradient (tcp_dense) at the same pusher count; cpu_cores: CPUs "
    "this "
    "process kept busy over the measurement (on a shared machine a path with "
    "more runnable threads, or threads that sleep between requests, wins "
    "more of it); selected_per_cpu_s = selected_per_s / cpu_cores. "
    "stage_us_per_push: the "
    "shard's own clock of each push (gradwire_shard_push_stage_seconds_total) "
    "over the pushes of the timed calls (the warm-up call excluded): parse and "
    "respond are the "
    "gRPC service's (absent in process), decode is the chunks' decoding and "
    "validation, lock_wait the chunk locks, update judging and applying "
    "(aggregation, optimizer), journal the write-ahead log (off here).";

using Json = nlohmann::ordered_json;

Json StagesJson(const ServerResultRow& r) {
  Json stages = Json::object();
  for (size_t i = 0; i < r.stage_us_per_push.size(); ++i) {
    stages[kPushStageNames[i]] = Rounded(r.stage_us_per_push[i], "%.4g");
  }
  return stages;
}

Json RowJson(const ServerResultRow& r) {
  Json row = {{"pushers", r.pushers},
              {"path", r.path},
              {"mode", r.mode},
              {"selected_per_s", Rounded(r.selected_per_s, "%.6g")},
              {"dense_equiv_gb_per_s", Rounded(r.dense_equiv_gb_per_s, "%.6g")},
              {"vs_tcp", Rounded(r.vs_tcp, "%.6g")},
              {"vs_tcp_dense", Rounded(r.vs_tcp_dense, "%.6g")},
              {"payload_bytes_per_s", Rounded(r.payload_bytes_per_s, "%.6g")},
              {"cpu_cores", Rounded(r.cpu_cores, "%.3g")},
              {"selected_per_cpu_s", Rounded(r.selected_per_cpu_s, "%.6g")},
              {"seconds", Rounded(r.seconds, "%.6g")},
              {"reps", r.reps},
              {"rounds", r.rounds}};
  if (!r.stage_us_per_push.empty()) row["stage_us_per_push"] = StagesJson(r);
  return row;
}

Json ApplyJson(const ApplyResultRow& r) {
  return {{"rule", r.rule},
          {"selected", r.selected},
          {"numel", r.numel},
          {"sparse_ns_per_selected", Rounded(r.sparse_ns_per_selected, "%.4g")},
          {"dense_ns_per_element", Rounded(r.dense_ns_per_element, "%.4g")},
          {"ratio", Rounded(r.ratio, "%.4g")},
          {"selected_per_s", Rounded(r.selected_per_s, "%.6g")}};
}

}  // namespace

void PrintServerTableHeader(std::FILE* out) {
  std::fprintf(
      out, "%7s %-4s %-10s %6s %9s %4s %9s %10s %9s %7s %8s %5s %11s\n",
      "pushers", "mode", "path", "rounds", "ms", "reps", "MB/s", "Msel/s",
      "dense_GB/s", "vs_tcp", "vs_dense", "cores", "Msel/cpu_s");
}

void PrintServerTableRow(const ServerResultRow& r, std::FILE* out) {
  std::fprintf(
      out,
      "%7u %-4s %-10s %6d %9.2f %4d %9.1f %10.2f %10.2f %6.3fx %7.2fx %5.2f "
      "%11.2f\n",
      r.pushers, r.mode.c_str(), r.path.c_str(), r.rounds, r.seconds * 1e3,
      r.reps, r.payload_bytes_per_s / 1e6, r.selected_per_s / 1e6,
      r.dense_equiv_gb_per_s, r.vs_tcp, r.vs_tcp_dense, r.cpu_cores,
      r.selected_per_cpu_s / 1e6);
  if (!r.stage_us_per_push.empty()) {
    std::string stages;
    for (size_t i = 0; i < r.stage_us_per_push.size(); ++i) {
      absl::StrAppendFormat(&stages, " %s %.1f", kPushStageNames[i],
                            r.stage_us_per_push[i]);
    }
    std::fprintf(out, "%7s us/push:%s\n", "", stages.c_str());
  }
  std::fflush(out);
}

absl::Status WriteServerJson(const std::string& path, const ServerRunInfo& info,
                             const std::vector<ServerResultRow>& rows,
                             const std::vector<ApplyResultRow>& apply) {
  Json results = Json::array();
  for (const ServerResultRow& r : rows) results.push_back(RowJson(r));
  Json apply_rows = Json::array();
  for (const ApplyResultRow& r : apply) apply_rows.push_back(ApplyJson(r));
  const Json report = {{"host", HostJson(info.host)},
                       {"numel", info.numel},
                       {"num_chunks", info.num_chunks},
                       {"compressor", info.compressor},
                       {"density", Rounded(info.density, "%.6g")},
                       {"chunks_per_push", info.chunks_per_push},
                       {"bytes_per_push", Rounded(info.bytes_per_push, "%.6g")},
                       {"apply_threads", info.apply_threads},
                       {"notes", kNotes},
                       {"results", std::move(results)},
                       {"apply", std::move(apply_rows)}};
  if (!WriteJsonFile(path, report)) {
    return absl::UnavailableError(
        absl::StrCat("cannot write JSON results to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
