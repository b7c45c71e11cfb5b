// Results of the compression benchmark: one row per measurement, printed as a
// table and written as JSON.
#ifndef GRADWIRE_BENCH_COMMON_REPORT_H_
#define GRADWIRE_BENCH_COMMON_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gradwire::bench {

struct ResultRow {
  // Compressor name, or the baselines "torch_topk" and "memcpy".
  std::string compressor;
  uint64_t numel = 0;
  // Requested fraction of elements kept; nullopt for compressors that take
  // no ratio (dense and quantizing ones) and for memcpy.
  std::optional<double> ratio;
  // Fraction of elements the last timed call really selected.
  std::optional<double> achieved_ratio;
  // Median seconds of one call, and the number of timed calls.
  double seconds = 0.0;
  int reps = 0;
  // Threads the call ran on. Above 1: the buffer split into chunks of the
  // worker's size, compressed in parallel on a ThreadPool (as a worker
  // compresses a push).
  int threads = 1;
  // Elements per chunk when the buffer was compressed chunk by chunk, one
  // FeedbackState each, as a worker does with --partition-bytes; 0: one
  // call over the whole buffer.
  uint64_t chunk_elements = 0;
  // torch_topk seconds / ours, at the same numel and ratio (1% for rows
  // without a ratio). Above 1: we are faster.
  std::optional<double> vs_torch_topk;
  // Ours / memcpy seconds of the same numel: how many buffer copies we cost.
  std::optional<double> vs_memcpy;
  // Encoded ChunkData bytes of the last timed call, per selected element,
  // with the values as compressed (fp16 for sparsifiers) and re-encoded as
  // fp32 (nullopt where the encoding carries no per-element values).
  std::optional<uint64_t> wire_bytes;
  std::optional<double> wire_bytes_per_selected;
  std::optional<double> wire_bytes_per_selected_fp32;
};

struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  unsigned hardware_threads = 0;
  // The compression kernels this process runs: "avx512", "avx2" or
  // "portable" (common/compress/kernels.h; GRADWIRE_KERNELS narrows it).
  std::string instruction_set;
};

// Reads the host name, /proc/cpuinfo's model name, the thread count and the
// kernels' instruction set.
HostInfo CurrentHost();

// Prints the column header, then one line per row.
void PrintTableHeader(std::FILE* out);
void PrintTableRow(const ResultRow& row, std::FILE* out);

// Writes {"torch_threads", "host", "notes", "results": [...]} to `path`;
// absent values are null. Returns an error naming the file when it cannot be
// written.
absl::Status WriteJson(const std::string& path, const HostInfo& host,
                       int torch_threads, const std::vector<ResultRow>& rows);

// Shared by the benchmarks' JSON writers. The reports are ordered_json, so
// that their keys stay in the order they are written.
//
// {"hostname", "cpu", "hardware_threads", "instruction_set"}: the "host" of
// every report.
nlohmann::ordered_json HostJson(const HostInfo& host);

// `value` rounded as `format` prints it ("%.6g": six significant digits,
// "%.2f": two decimals), still a number: a report carries the precision a
// figure has, not the noise of a float widened to a double. Not finite
// values stay so (and are written as null).
double Rounded(double value, const absl::FormatSpec<double>& format);

// Replaces the file `path` with `report` pretty-printed (two-space indent)
// and a newline; text that is not valid UTF-8 is written with U+FFFD. False
// when the file cannot be written.
bool WriteJsonFile(const std::string& path,
                   const nlohmann::ordered_json& report);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMMON_REPORT_H_
