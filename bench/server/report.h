// Results of the server benchmark: one row per (pushers, mode, path),
// printed as a table and written as JSON.
#ifndef GRADWIRE_BENCH_SERVER_REPORT_H_
#define GRADWIRE_BENCH_SERVER_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/common/report.h"
#include "bench/server/apply.h"

namespace gradwire::bench {

struct ServerResultRow {
  uint32_t pushers = 0;
  // "in_process", "grpc", "tcp" (the bound: the pushes' own bytes) or
  // "tcp_dense" (the dense gradient's bytes, for sparse pushes).
  std::string path;
  // "asp" or "bsp"; "-" for tcp, which has no shard.
  std::string mode;
  // Rounds per timed call, the call's median seconds and the timed calls.
  int rounds = 0;
  double seconds = 0.0;
  int reps = 0;
  // Per second, over one timed call: elements the pushes carried (and, for
  // in_process and grpc, the shard applied), serialized PushRequest bytes.
  double selected_per_s = 0.0;
  double payload_bytes_per_s = 0.0;
  // selected_per_s / density * 4 bytes / 1e9: the dense fp32 volume the same
  // updates stand for.
  double dense_equiv_gb_per_s = 0.0;
  // payload_bytes_per_s / the tcp row's, at the same pusher count.
  double vs_tcp = 0.0;
  // dense_equiv_gb_per_s * 1e9 / the payload bytes/s of raw TCP carrying
  // the dense fp32 gradient (the tcp_dense row; the tcp row when the
  // pushes are dense), at the same pusher count: how many times the dense
  // volume raw TCP moves the pushes stand for.
  double vs_tcp_dense = 0.0;
  // CPUs this process kept busy, on average, over the measurement (warm-up
  // and timed calls; client, server and reader threads alike).
  double cpu_cores = 0.0;
  // selected_per_s / cpu_cores: elements per CPU-second this process spent,
  // the cost of a path independent of the CPU share it won.
  double selected_per_cpu_s = 0.0;
  // in_process and grpc: microseconds one push spent in each stage of the
  // shard (PushStage order: parse, decode, lock_wait, update, journal,
  // respond), averaged over every push of the measurement; parse and
  // respond are the service's, so 0 in process. Empty for tcp.
  std::vector<double> stage_us_per_push;
};

// Facts of the run that the JSON carries next to the rows.
struct ServerRunInfo {
  HostInfo host;
  uint64_t numel = 0;
  uint64_t num_chunks = 0;
  // The pushes' compressor and the fraction of elements they carry.
  std::string compressor;
  double density = 0.0;
  // Chunks per push request (ServerBenchConfig::chunks_per_push; 0: all).
  uint32_t chunks_per_push = 1;
  // Serialized bytes of one push request, averaged over the workload.
  double bytes_per_push = 0.0;
  // ServerBenchConfig::apply_threads.
  int apply_threads = -1;
};

// Prints the column header, then one line per row (and, for a row with
// stages, a second line with them).
void PrintServerTableHeader(std::FILE* out);
void PrintServerTableRow(const ServerResultRow& row, std::FILE* out);

// Writes {"host", "numel", "num_chunks", "compressor", "density",
// "chunks_per_push", "bytes_per_push", "apply_threads",
// "notes", "results": [{"pushers", "path", "mode", "selected_per_s",
// "dense_equiv_gb_per_s", "vs_tcp", "vs_tcp_dense", "payload_bytes_per_s",
// "cpu_cores",
// "selected_per_cpu_s", "seconds", "reps", "rounds", "stage_us_per_push":
// {"parse": ..., ...}}], "apply": [{"rule", "selected", "numel",
// "sparse_ns_per_selected", "dense_ns_per_element", "ratio",
// "selected_per_s"}]} to `path`. Returns an error naming the file when it
// cannot be written.
absl::Status WriteServerJson(const std::string& path, const ServerRunInfo& info,
                             const std::vector<ServerResultRow>& rows,
                             const std::vector<ApplyResultRow>& apply);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_REPORT_H_
