// gradwire-bench-server: how fast one shard aggregates compressed pushes,
// in process and over loopback gRPC, against the same bytes over plain
// loopback TCP measured in the same run.
//
//   gradwire-bench-server [--quick] [--numel=25000000] [--compressor=topk]
//                         [--density=0.01] [--pushers=1,2,8] [--modes=asp,bsp]
//                         [--rounds=4]
//                         [--paths=in_process,grpc] [--apply_threads=-1]
//                         [--json=FILE]
//
// The model (--numel parameters, one tensor) is cut into 4 MiB chunks and
// placed on one shard with plain SGD. Each pusher is a worker id with one
// thread and pre-built pushes, one PushRequest per chunk (by default Top-K
// fp16 at --density; --compressor=none or fp16 for dense pushes): one request
// per chunk rather than all chunks in one request, because chunks are
// independent on the shard (each has its own lock) and separate requests let
// concurrent pushes use that parallelism. ASP applies every push at once with
// no barrier, so its rows are the shard's aggregation throughput; BSP sums the
// pushes of a step and runs the optimizer once per chunk and step, with the
// pushers meeting at a barrier after each round.
//
// Rates are wall-clock. On a machine shared with other work, the CPU share a
// path wins depends on its threads (the scheduler favours threads that
// sleep between requests, as gRPC's do), so the table also gives the CPUs
// this process used and the elements applied per CPU-second.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/common/report.h"
#include "bench/common/timing.h"
#include "bench/server/apply.h"
#include "bench/server/config.h"
#include "bench/server/push.h"
#include "bench/server/report.h"
#include "bench/server/tcp.h"
#include "bench/server/workload.h"
#include "common/flags/program.h"
#include "common/heap_tuning.h"
#include "common/lock_checks.h"

namespace gradwire::bench {
namespace {

// Pushers' traffic built at least, whatever --pushers asks for
// (PusherPool takes turns over them).
constexpr uint32_t kMinLoads = 8;

const char* PathName(PushPath path) {
  return path == PushPath::kGrpc ? "grpc" : "in_process";
}

const char* ModeName(v1::ConsistencyMode mode) {
  return mode == v1::CONSISTENCY_MODE_BSP ? "bsp" : "asp";
}

// Fills the rates of `row` from one timed call's volume of `loads`.
void FillRates(absl::Span<const PusherLoad> loads, double density,
               const Timing& timing, ServerResultRow* row) {
  uint64_t selected = 0;
  uint64_t bytes = 0;
  for (const PusherLoad& load : loads) {
    selected += load.selected;
    bytes += load.payload_bytes;
  }
  row->seconds = timing.median_seconds;
  row->reps = timing.reps;
  row->selected_per_s = selected * row->rounds / timing.median_seconds;
  row->payload_bytes_per_s = bytes * row->rounds / timing.median_seconds;
  row->dense_equiv_gb_per_s = row->selected_per_s / density * 4 / 1e9;
  if (row->cpu_cores > 0) {
    row->selected_per_cpu_s = row->selected_per_s / row->cpu_cores;
  }
}

// The CPUs this process kept busy, on average, since construction: on a
// shared machine, paths with more runnable threads win a larger share of it,
// so wall-clock rates alone do not compare their cost.
class CpuMeter {
 public:
  CpuMeter() : cpu_start_(ProcessCpuSeconds()), wall_start_(Clock::now()) {}

  double Cores() const {
    const double wall =
        std::chrono::duration<double>(Clock::now() - wall_start_).count();
    return wall > 0 ? (ProcessCpuSeconds() - cpu_start_) / wall : 0.0;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static double ProcessCpuSeconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return now.tv_sec + now.tv_nsec * 1e-9;
  }

  const double cpu_start_;
  const Clock::time_point wall_start_;
};

ServerResultRow NewRow(uint32_t pushers, std::string path, std::string mode,
                       int rounds) {
  ServerResultRow row;
  row.pushers = pushers;
  row.path = std::move(path);
  row.mode = std::move(mode);
  row.rounds = rounds;
  return row;
}

// The raw TCP bound of `loads` (the pushes' own bytes, or the dense
// gradient's: `path` names which).
absl::StatusOr<ServerResultRow> MeasureTcp(const ServerBenchConfig& config,
                                           absl::Span<const PusherLoad> loads,
                                           double density, std::string path) {
  const uint32_t pushers = static_cast<uint32_t>(loads.size());
  absl::StatusOr<std::unique_ptr<TcpLoopback>> loopback =
      TcpLoopback::Open(pushers);
  if (!loopback.ok()) return loopback.status();
  const CpuMeter cpu;
  absl::StatusOr<Timing> t = MeasureMedian(config.timing, [&] {
    return (*loopback)->Transfer(loads, config.rounds);
  });
  if (!t.ok()) return t.status();
  ServerResultRow row = NewRow(pushers, std::move(path), "-", config.rounds);
  row.cpu_cores = cpu.Cores();
  FillRates(loads, density, *t, &row);
  row.vs_tcp = 1.0;
  row.vs_tcp_dense = row.dense_equiv_gb_per_s * 1e9 / row.payload_bytes_per_s;
  return row;
}

// Every push must have run the optimizer (ASP) or completed a step with
// the others (BSP): a refused or duplicate push would not count.
absl::Status CheckUpdates(const PushTarget& target, v1::ConsistencyMode mode,
                          uint32_t pushers, uint64_t num_chunks,
                          uint64_t steps) {
  const uint64_t per_step =
      mode == v1::CONSISTENCY_MODE_BSP ? num_chunks : num_chunks * pushers;
  if (target.updates_applied() == per_step * steps) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("the shard applied ", target.updates_applied(),
                   " updates, expected ", per_step * steps));
}

absl::StatusOr<ServerResultRow> MeasurePushes(const ServerBenchConfig& config,
                                              PushPath path,
                                              v1::ConsistencyMode mode,
                                              uint32_t pushers,
                                              Workload* workload) {
  const v1::InitRequest& init = ConfigureInit(pushers, mode, workload);
  absl::StatusOr<std::unique_ptr<PushTarget>> target =
      path == PushPath::kGrpc ? StartGrpc(init, pushers, config.apply_threads)
                              : StartInProcess(init, config.apply_threads);
  if (!target.ok()) return target.status();
  const absl::Span<PusherLoad> loads =
      absl::MakeSpan(workload->pushers).first(pushers);
  uint64_t next_step = 0;
  absl::StatusOr<Timing> t;
  double cores = 0.0;
  // The shard's stage clocks when the first timed call starts: the stages
  // reported are those of the timed calls, without the warm-up's first
  // touches of every buffer.
  std::vector<double> stages_before(kNumPushStages, 0.0);
  uint64_t first_timed_step = 0;
  {
    PusherPool pool(absl::MakeSpan(workload->pushers), pushers,
                    mode == v1::CONSISTENCY_MODE_BSP, target->get());
    const CpuMeter cpu;
    int calls = 0;
    t = MeasureMedian(config.timing, [&] {
      if (calls++ == 1) {
        first_timed_step = next_step;
        for (int i = 0; i < kNumPushStages; ++i) {
          stages_before[i] =
              (*target)->stage_seconds(static_cast<PushStage>(i));
        }
      }
      const absl::Status s = pool.Run(next_step, config.rounds);
      next_step += config.rounds;
      return s;
    });
    cores = cpu.Cores();
  }
  if (!t.ok()) return t.status();
  absl::Status s =
      CheckUpdates(**target, mode, pushers, workload->num_chunks, next_step);
  if (!s.ok()) return s;
  ServerResultRow row =
      NewRow(pushers, PathName(path), ModeName(mode), config.rounds);
  row.cpu_cores = cores;
  FillRates(loads, workload->density, *t, &row);
  // The pushes of the timed calls: each pusher pushes each of its requests
  // once a round.
  double pushes = 0;
  for (const PusherLoad& load : loads) {
    pushes += static_cast<double>(load.requests.size()) *
              (next_step - first_timed_step);
  }
  for (int i = 0; i < kNumPushStages; ++i) {
    const double seconds =
        (*target)->stage_seconds(static_cast<PushStage>(i)) - stages_before[i];
    row.stage_us_per_push.push_back(pushes > 0 ? seconds * 1e6 / pushes : 0);
  }
  return row;
}

// The tcp bound (and, for sparse pushes, the dense gradient's tcp bound
// from `dense_loads`), then every mode and path, at one pusher count.
absl::Status MeasurePusherCount(const ServerBenchConfig& config,
                                uint32_t pushers,
                                absl::Span<const PusherLoad> dense_loads,
                                Workload* workload,
                                std::vector<ServerResultRow>* rows) {
  const absl::Span<const PusherLoad> loads =
      absl::MakeConstSpan(workload->pushers).first(pushers);
  absl::StatusOr<ServerResultRow> tcp =
      MeasureTcp(config, loads, workload->density, "tcp");
  if (!tcp.ok()) return tcp.status();
  PrintServerTableRow(*tcp, stdout);
  rows->push_back(*tcp);
  // The dense gradient over raw TCP: what the pushes stand for.
  double dense_tcp_bytes_per_s = tcp->payload_bytes_per_s;
  if (!dense_loads.empty()) {
    absl::StatusOr<ServerResultRow> dense =
        MeasureTcp(config, dense_loads.first(pushers), 1.0, "tcp_dense");
    if (!dense.ok()) return dense.status();
    PrintServerTableRow(*dense, stdout);
    dense_tcp_bytes_per_s = dense->payload_bytes_per_s;
    rows->push_back(*std::move(dense));
  }
  for (v1::ConsistencyMode mode : config.modes) {
    for (PushPath path : config.paths) {
      absl::StatusOr<ServerResultRow> row =
          MeasurePushes(config, path, mode, pushers, workload);
      if (!row.ok()) {
        return absl::Status(
            row.status().code(),
            absl::StrCat(pushers, " pushers, ", ModeName(mode), ", ",
                         PathName(path), ": ", row.status().message()));
      }
      row->vs_tcp = row->payload_bytes_per_s / tcp->payload_bytes_per_s;
      row->vs_tcp_dense =
          row->dense_equiv_gb_per_s * 1e9 / dense_tcp_bytes_per_s;
      PrintServerTableRow(*row, stdout);
      rows->push_back(*std::move(row));
    }
  }
  return absl::OkStatus();
}

ServerRunInfo RunInfo(const ServerBenchConfig& config,
                      const Workload& workload) {
  ServerRunInfo info;
  info.host = CurrentHost();
  info.numel = workload.numel;
  info.num_chunks = workload.num_chunks;
  info.compressor = config.compressor;
  info.density = workload.density;
  info.chunks_per_push = config.chunks_per_push;
  info.apply_threads = config.apply_threads;
  const PusherLoad& first = workload.pushers.front();
  info.bytes_per_push =
      static_cast<double>(first.payload_bytes) / first.requests.size();
  return info;
}

std::string ChunksPerPushText(uint32_t chunks_per_push) {
  if (chunks_per_push == 0) return "all chunks";
  if (chunks_per_push == 1) return "one chunk";
  return absl::StrCat(chunks_per_push, " chunks");
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gradwire-bench-server: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Main(const ServerBenchConfig& config) {
  // The shard measured here gets the heap gradwire-server gives it: without
  // this, every chunk-sized buffer of a dense push is a fresh mapping.
  std::printf("%s\n", TuneHeapForTraining().description.c_str());
  // At least kMinLoads pushers' traffic, so that a few pushers take turns
  // over several (PusherPool) instead of resending the same positions.
  const uint32_t max_pushers =
      *std::max_element(config.pushers.begin(), config.pushers.end());
  const uint32_t loads = std::max(max_pushers, kMinLoads);
  const auto build_start = std::chrono::steady_clock::now();
  absl::StatusOr<Workload> workload = BuildWorkload(config, loads);
  if (!workload.ok()) return Fail(workload.status());
  const double build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                    build_start)
          .count();
  const ServerRunInfo info = RunInfo(config, *workload);
  std::printf(
      "host %s (%s, %u hardware threads, kernels %s)\n"
      "%llu parameters in %llu chunks on 1 shard, SGD; pushes: %s carrying "
      "%g of the elements, %s per request, %.0f bytes each; built in "
      "%.1f s "
      "(untimed)\n"
      "rounds: every pusher pushes every chunk once; ms: median per timed "
      "call; MB/s: serialized PushRequest bytes; Msel/s: selected elements "
      "applied; dense_GB/s: the fp32 volume they stand for; vs_tcp: MB/s / "
      "tcp MB/s (tcp: same bytes, raw loopback socket, no shard); "
      "vs_dense: dense_GB/s / tcp_dense MB/s (tcp_dense: the dense fp32 "
      "gradient's bytes over the same socket); cores: "
      "CPUs this process kept busy during the measurement; Msel/cpu_s: "
      "Msel/s per core\n",
      info.host.hostname.c_str(), info.host.cpu_model.c_str(),
      info.host.hardware_threads, info.host.instruction_set.c_str(),
      static_cast<unsigned long long>(info.numel),
      static_cast<unsigned long long>(info.num_chunks), info.compressor.c_str(),
      info.density, ChunksPerPushText(config.chunks_per_push).c_str(),
      info.bytes_per_push, build_seconds);
  absl::StatusOr<std::vector<ApplyResultRow>> apply = MeasureApply(config);
  if (!apply.ok()) return Fail(apply.status());
  PrintApplyTable(*apply, stdout);
  // Sparse pushes stand for a dense gradient: its raw TCP bound too.
  const std::vector<PusherLoad> dense_loads =
      workload->density < 1.0
          ? BuildDenseTcpLoads(workload->numel, config.partition_bytes,
                               max_pushers)
          : std::vector<PusherLoad>();
  std::vector<ServerResultRow> rows;
  PrintServerTableHeader(stdout);
  for (uint32_t pushers : config.pushers) {
    absl::Status s =
        MeasurePusherCount(config, pushers, dense_loads, &*workload, &rows);
    if (!s.ok()) return Fail(s);
  }
  if (!config.json_path.empty()) {
    absl::Status s = WriteServerJson(config.json_path, info, rows, *apply);
    if (!s.ok()) return Fail(s);
    std::printf("wrote %s\n", config.json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace gradwire::bench

int main(int argc, char** argv) {
  gradwire::DisableMutexDeadlockDetection();
  const std::vector<absl::string_view> flag_names = gradwire::JoinFlagNames(
      {gradwire::bench::ServerBenchFlagNames(), gradwire::kDryRunFlagNames});
  const gradwire::ProgramFlags program = {
      "gradwire-bench-server",
      "Measures how fast one gradwire shard aggregates Top-K pushes from "
      "concurrent pushers, in process and over loopback gRPC, against the "
      "same bytes over a raw loopback TCP socket.\n"
      "Usage: gradwire-bench-server [--quick] [--numel=25000000] "
      "[--compressor=topk] [--density=0.01] [--pushers=1,2,8] "
      "[--modes=asp,bsp] [--rounds=4] "
      "[--paths=in_process,grpc] [--apply_threads=-1] [--json=FILE]",
      flag_names};
  gradwire::ParseFlagsOrExit(program, argc, argv);
  absl::StatusOr<gradwire::bench::ServerBenchConfig> config =
      gradwire::bench::ServerBenchConfigFromFlags();
  if (!config.ok()) gradwire::ExitWithUsageError(program, config.status());
  gradwire::ExitAfterDryRunIfRequested(program);
  return gradwire::bench::Main(*config);
}
