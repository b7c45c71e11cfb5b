// gradwire-bench-compress: every compressor with error feedback against
// torch::topk and memcpy, measured in the same run on the same buffer.
//
//   gradwire-bench-compress [--quick] [--sizes=1M,25M] [--ratios=0.01,0.001]
//                           [--compressors=topk,qsgd] [--momentum=0.9]
//                           [--json=FILE]
//
// Our compressors run on one thread; libtorch gets one thread per hardware
// thread (--torch_threads), and the count is printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/types/span.h"
#include "bench/common/report.h"
#include "bench/common/timing.h"
#include "bench/compress/compress_call.h"
#include "bench/compress/config.h"
#include "bench/compress/torch_baseline.h"
#include "common/codec/codec.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "common/flags/program.h"
#include "common/threads/thread_pool.h"

namespace gradwire::bench {
namespace {

// The compressors whose output size follows `ratio`. Every other compressor
// (none, fp16, bf16, qsgd, onebit, ...) is run once per size, with no ratio.
constexpr const char* kRatioCompressors[] = {"topk", "randomk", "dgc",
                                             "threshold"};
// Rows without a ratio are compared with torch::topk at this ratio.
constexpr double kReferenceRatio = 0.01;

bool TakesRatio(const std::string& name) {
  return std::find(std::begin(kRatioCompressors), std::end(kRatioCompressors),
                   name) != std::end(kRatioCompressors);
}

ResultRow NewRow(std::string compressor, uint64_t numel,
                 std::optional<double> ratio = std::nullopt) {
  ResultRow row;
  row.compressor = std::move(compressor);
  row.numel = numel;
  row.ratio = ratio;
  return row;
}

uint64_t CountForRatio(uint64_t numel, double ratio) {
  CompressorOptions options;
  options.ratio = ratio;
  return KeptCount(options, numel);
}

std::vector<float> GaussianGradient(uint64_t numel, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(numel);
  for (float& x : g) x = normal(rng);
  return g;
}

// The threshold compressor gets the k-th largest |g| (k = ratio * numel),
// computed once before timing, so that its first call keeps about `ratio` of
// the elements. With error feedback and the same gradient on every call the
// unsent residual grows and later calls keep more; achieved_ratio shows the
// density of the last timed call.
float MagnitudeQuantile(absl::Span<const float> g, double ratio) {
  std::vector<float> magnitude(g.size());
  for (size_t i = 0; i < g.size(); ++i) magnitude[i] = std::fabs(g[i]);
  const uint64_t k = CountForRatio(g.size(), ratio);
  std::nth_element(magnitude.begin(), magnitude.begin() + (k - 1),
                   magnitude.end(), std::greater<float>());
  return magnitude[k - 1];
}

absl::StatusOr<Timing> MeasureMemcpy(absl::Span<const float> g,
                                     const TimingOptions& timing) {
  std::vector<float> copy(g.size());
  return MeasureMedian(timing, [&] {
    std::memcpy(copy.data(), g.data(), g.size() * sizeof(float));
    KeepMemory(copy.data());
    return absl::OkStatus();
  });
}

// Fills the selection and wire fields of `row` from the last output.
absl::Status DescribeOutput(const CompressedChunk& chunk, ResultRow* row) {
  v1::ChunkData message;
  if (absl::Status s = EncodeChunk(chunk, &message); !s.ok()) return s;
  const uint64_t selected = chunk.SelectedCount();
  row->achieved_ratio = static_cast<double>(selected) / chunk.numel;
  row->wire_bytes = message.ByteSizeLong();
  if (selected == 0) return absl::OkStatus();
  row->wire_bytes_per_selected =
      static_cast<double>(message.ByteSizeLong()) / selected;
  if (chunk.encoding != Encoding::kDense &&
      chunk.encoding != Encoding::kSparse &&
      chunk.encoding != Encoding::kRandomK) {
    return absl::OkStatus();  // QSGD and sign: no per-element values.
  }
  // Every fp16/bf16 value is exact in fp32, so the copy stays well formed.
  CompressedChunk fp32 = chunk;
  fp32.precision = ValuePrecision::kFp32;
  if (absl::Status s = EncodeChunk(fp32, &message); !s.ok()) return s;
  row->wire_bytes_per_selected_fp32 =
      static_cast<double>(message.ByteSizeLong()) / selected;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Compressor>> MakeBenchCompressor(
    const std::string& name, std::optional<double> ratio,
    absl::Span<const float> g) {
  CompressorOptions options;
  options.name = name;
  options.levels = 256;  // qsgd
  if (ratio.has_value()) {
    options.ratio = *ratio;
    options.precision = ValuePrecision::kFp16;  // The headline wire format.
    if (name == "threshold") options.threshold = MagnitudeQuantile(g, *ratio);
  }
  return MakeCompressor(options);
}

// One compressor at one ratio (nullopt: the compressor takes none).
absl::StatusOr<ResultRow> MeasureCompressor(const std::string& name,
                                            std::optional<double> ratio,
                                            absl::Span<const float> g,
                                            Momentum momentum, float factor,
                                            const TimingOptions& timing) {
  absl::StatusOr<std::unique_ptr<Compressor>> compressor =
      MakeBenchCompressor(name, ratio, g);
  if (!compressor.ok()) return compressor.status();
  ChunkState state;
  CompressContext context;
  absl::StatusOr<Timing> t = MeasureMedian(timing, [&] {
    ++context.step;
    return CompressOnce(**compressor, momentum, factor, g, context, &state);
  });
  if (!t.ok()) return t.status();
  const CompressedChunk& chunk = state.out;
  ResultRow row = NewRow(name + RowSuffix(momentum), g.size(), ratio);
  row.seconds = t->median_seconds;
  row.reps = t->reps;
  if (absl::Status s = DescribeOutput(chunk, &row); !s.ok()) return s;
  return row;
}

// One compressor at one ratio over chunks of `chunk_elements` floats of g,
// compressed in parallel on `pool`, one FeedbackState per chunk.
absl::StatusOr<ResultRow> MeasureParallel(
    const std::string& name, std::optional<double> ratio,
    absl::Span<const float> g, Momentum momentum, float factor,
    uint64_t chunk_elements, ThreadPool* pool, const TimingOptions& timing) {
  absl::StatusOr<std::unique_ptr<Compressor>> compressor =
      MakeBenchCompressor(name, ratio, g);
  if (!compressor.ok()) return compressor.status();
  const size_t chunks = (g.size() + chunk_elements - 1) / chunk_elements;
  std::vector<ChunkState> states(chunks);
  std::vector<absl::Status> status(chunks);
  CompressContext context;
  absl::StatusOr<Timing> t = MeasureMedian(timing, [&] {
    ++context.step;
    pool->ParallelFor(chunks, [&](size_t i) {
      CompressContext chunk_context = context;
      chunk_context.chunk_key = i;
      const uint64_t first = i * chunk_elements;
      status[i] = CompressOnce(
          **compressor, momentum, factor,
          g.subspan(first,
                    std::min<uint64_t>(chunk_elements, g.size() - first)),
          chunk_context, &states[i]);
    });
    for (const absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!t.ok()) return t.status();
  ResultRow row = NewRow(name + RowSuffix(momentum), g.size(), ratio);
  row.seconds = t->median_seconds;
  row.reps = t->reps;
  row.threads = pool->threads() + 1;  // The caller's among them.
  row.chunk_elements = chunk_elements;
  uint64_t selected = 0;
  for (const ChunkState& state : states) selected += state.out.SelectedCount();
  row.achieved_ratio = static_cast<double>(selected) / g.size();
  return row;
}

// Measures one size: memcpy, torch::topk at every ratio (and at the
// reference ratio), then every compressor; prints each row as it is done.
class SizeRun {
 public:
  SizeRun(const BenchConfig& config, absl::Span<const float> g,
          std::vector<ResultRow>* rows)
      : config_(config),
        g_(g),
        rows_(rows),
        one_thread_(ThreadPoolOptions{/*threads=*/0}),
        // The measuring thread compresses too: one thread fewer.
        pool_(ThreadPoolOptions{/*threads=*/config.threads - 1}) {}

  absl::Status Run() {
    absl::StatusOr<Timing> copy = MeasureMemcpy(g_, config_.timing);
    if (!copy.ok()) return copy.status();
    memcpy_seconds_ = copy->median_seconds;
    Add(TimedRow(NewRow("memcpy", g_.size()), *copy), std::nullopt);
    std::vector<double> torch_ratios = config_.ratios;
    torch_ratios.push_back(kReferenceRatio);
    for (double ratio : torch_ratios) {
      if (torch_seconds_.count(ratio) != 0) continue;
      if (absl::Status s = RunTorch(ratio); !s.ok()) return s;
    }
    for (const std::string& name : config_.compressors) {
      if (!TakesRatio(name)) {
        if (absl::Status s = RunCompressor(name, std::nullopt, Momentum::kNone);
            !s.ok()) {
          return s;
        }
        continue;
      }
      for (double ratio : config_.ratios) {
        for (Momentum momentum : MomentumRows()) {
          if (absl::Status s = RunCompressor(name, ratio, momentum); !s.ok()) {
            return s;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status RunTorch(double ratio) {
    const uint64_t k = CountForRatio(g_.size(), ratio);
    absl::StatusOr<Timing> t = MeasureTorchTopK(g_, k, config_.timing);
    if (!t.ok()) return t.status();
    torch_seconds_[ratio] = t->median_seconds;
    ResultRow row = TimedRow(NewRow("torch_topk", g_.size(), ratio), *t);
    row.achieved_ratio = static_cast<double>(k) / g_.size();
    Add(std::move(row), ratio);
    return absl::OkStatus();
  }

  // The rows of a ratio compressor: without momentum, then (with
  // --momentum) after the momentum step, fused and in two passes.
  std::vector<Momentum> MomentumRows() const {
    if (config_.momentum == 0.0) return {Momentum::kNone};
    return {Momentum::kNone, Momentum::kFused, Momentum::kTwoPasses};
  }

  absl::Status RunCompressor(const std::string& name,
                             std::optional<double> ratio, Momentum momentum) {
    const auto factor = static_cast<float>(config_.momentum);
    absl::StatusOr<ResultRow> row =
        MeasureCompressor(name, ratio, g_, momentum, factor, config_.timing);
    if (!row.ok()) return row.status();
    Add(*std::move(row), ratio.value_or(kReferenceRatio));
    if (g_.size() <= config_.chunk_elements) return absl::OkStatus();
    // Chunk by chunk on one thread: what one core of a worker pays for a
    // push of this size; then the same chunks on every thread.
    for (ThreadPool* pool : {&one_thread_, &pool_}) {
      if (pool == &pool_ && pool_.threads() == 0) break;
      row = MeasureParallel(name, ratio, g_, momentum, factor,
                            config_.chunk_elements, pool, config_.timing);
      if (!row.ok()) return row.status();
      Add(*std::move(row), ratio.value_or(kReferenceRatio));
    }
    return absl::OkStatus();
  }

  static ResultRow TimedRow(ResultRow row, const Timing& t) {
    row.seconds = t.median_seconds;
    row.reps = t.reps;
    return row;
  }

  // Completes `row` with its ratios against the baselines (`torch_ratio`:
  // which torch::topk run to compare with; none for memcpy), prints and
  // keeps it.
  void Add(ResultRow row, std::optional<double> torch_ratio) {
    if (torch_ratio.has_value()) {
      row.vs_torch_topk = torch_seconds_.at(*torch_ratio) / row.seconds;
    }
    row.vs_memcpy = row.seconds / memcpy_seconds_;
    PrintTableRow(row, stdout);
    rows_->push_back(std::move(row));
  }

  const BenchConfig& config_;
  const absl::Span<const float> g_;
  std::vector<ResultRow>* const rows_;
  double memcpy_seconds_ = 0.0;
  std::map<double, double> torch_seconds_;  // ratio -> median seconds
  ThreadPool one_thread_;
  ThreadPool pool_;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gradwire-bench-compress: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Main(const BenchConfig& config) {
  const HostInfo host = CurrentHost();
  // libtorch's own default here may be lower (it counts physical cores).
  const int torch_threads = SetTorchThreads(config.torch_threads);
  std::printf(
      "host %s (%s, %u hardware threads); kernels %s; torch threads %d; "
      "gradwire compressors on 1 thread, and on %d over chunks of %llu "
      "floats (thr)\n",
      host.hostname.c_str(), host.cpu_model.c_str(), host.hardware_threads,
      host.instruction_set.c_str(), torch_threads, config.threads,
      static_cast<unsigned long long>(config.chunk_elements));
  std::printf(
      "ms: median per call; vs_torch = torch_topk ms / ours (same ratio, 0.01 "
      "where ratio is '-'); vs_memcpy = ours / memcpy ms; B/sel = wire bytes "
      "per selected element (fp16 values for sparsifiers), B/sel32 with fp32 "
      "values\n");
  // Smaller sizes use a prefix of the largest buffer: gaussian as well.
  const std::vector<float> gradient = GaussianGradient(
      *std::max_element(config.sizes.begin(), config.sizes.end()), config.seed);
  std::vector<ResultRow> rows;
  PrintTableHeader(stdout);
  for (uint64_t size : config.sizes) {
    SizeRun run(config, absl::MakeConstSpan(gradient).first(size), &rows);
    if (absl::Status s = run.Run(); !s.ok()) return Fail(s);
  }
  if (!config.json_path.empty()) {
    absl::Status s = WriteJson(config.json_path, host, torch_threads, rows);
    if (!s.ok()) return Fail(s);
    std::printf("wrote %s\n", config.json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace gradwire::bench

int main(int argc, char** argv) {
  const std::vector<absl::string_view> flag_names = gradwire::JoinFlagNames(
      {gradwire::bench::CompressBenchFlagNames(), gradwire::kDryRunFlagNames});
  const gradwire::ProgramFlags program = {
      "gradwire-bench-compress",
      "Times every gradwire compressor with error feedback against "
      "torch::topk and memcpy on the same gaussian buffer.\n"
      "Usage: gradwire-bench-compress [--quick] [--sizes=1M,25M] "
      "[--ratios=0.01,0.001] [--compressors=topk,...] [--json=FILE]",
      flag_names};
  gradwire::ParseFlagsOrExit(program, argc, argv);
  absl::StatusOr<gradwire::bench::BenchConfig> config =
      gradwire::bench::BenchConfigFromFlags();
  if (!config.ok()) gradwire::ExitWithUsageError(program, config.status());
  gradwire::ExitAfterDryRunIfRequested(program);
  return gradwire::bench::Main(*config);
}
