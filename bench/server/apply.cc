#include "bench/server/apply.h"

#include <algorithm>
#include <random>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bench/common/timing.h"
#include "common/compress/compressor.h"
#include "server/shard/optimizer.h"

namespace gradwire::bench {
namespace {

// Pushes drawn per chunk; a timed call applies the next one, so that a
// call finds the positions of the call kPushesPerChunk before it, not its
// own from the previous call, as a shard finds each step's new Top-K.
constexpr size_t kPushesPerChunk = 8;

// One push: its positions and values.
struct ApplyPush {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

// One chunk: its weights, its optimizer state and kPushesPerChunk pushes.
struct ApplyChunk {
  std::vector<float> weights;
  std::vector<float> dense_gradient;
  OptimizerState state;
  std::vector<ApplyPush> pushes;
};

// Distinct sorted positions, `count` of `numel`, uniformly drawn.
std::vector<uint32_t> DrawPositions(uint64_t numel, uint64_t count,
                                    std::mt19937_64* rng) {
  std::vector<uint32_t> positions;
  positions.reserve(count);
  std::uniform_int_distribution<uint32_t> draw(
      0, static_cast<uint32_t>(numel - 1));
  while (positions.size() < count) {
    while (positions.size() < count) positions.push_back(draw(*rng));
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()),
                    positions.end());
  }
  return positions;
}

std::vector<ApplyChunk> BuildChunks(const ServerBenchConfig& config,
                                    double density, bool adam) {
  const uint64_t chunk_numel = config.partition_bytes / sizeof(float);
  std::mt19937_64 rng(config.seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<ApplyChunk> chunks;
  for (uint64_t begin = 0; begin < config.numel; begin += chunk_numel) {
    const uint64_t numel = std::min(chunk_numel, config.numel - begin);
    ApplyChunk chunk;
    chunk.weights.resize(numel);
    chunk.dense_gradient.resize(numel);
    for (float& w : chunk.weights) w = value(rng);
    for (float& g : chunk.dense_gradient) g = value(rng);
    const uint64_t count =
        std::max<uint64_t>(1, static_cast<uint64_t>(density * numel));
    chunk.pushes.resize(kPushesPerChunk);
    for (ApplyPush& push : chunk.pushes) {
      push.indices = DrawPositions(numel, count, &rng);
      push.values.resize(push.indices.size());
      for (float& v : push.values) v = value(rng);
    }
    if (adam) {
      // Past the freeze: the second moment alone, positive.
      chunk.state.updates = 1;
      chunk.state.second_moment.assign(numel, 0.25f);
    }
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

OptimizerSettings RuleSettings(bool adam) {
  OptimizerSettings settings;
  settings.learning_rate = 1e-4;
  if (adam) {
    settings.kind = OptimizerSettings::Kind::kAdam;
    settings.freeze_variance_after = 1;
  }
  return settings;
}

// Push `which` of every chunk, as the shard applies it: under plain SGD in
// place from the push's elements (ChunkUpdater::PrepareSparseInPlace, the
// weights' bound proving it finite); under a rule with element state
// (frozen Adam) into a buffer aside, checked, then stored
// (TryUpdateSelected, then Commit).
absl::Status ApplySparse(const Optimizer& optimizer, size_t which,
                         std::vector<ApplyChunk>* chunks,
                         std::vector<float>* out) {
  for (ApplyChunk& chunk : *chunks) {
    const ApplyPush& push = chunk.pushes[which];
    if (optimizer.KeepsNoElementState()) {
      optimizer.ApplySgdAtValues(absl::MakeSpan(chunk.weights), push.indices,
                                 push.values, AsTheyAre(), &chunk.state);
      continue;
    }
    out->resize(push.indices.size());
    if (!optimizer.ApplyAt(chunk.weights, chunk.state, push.indices,
                           push.values, chunk.state.updates,
                           absl::MakeSpan(*out))) {
      return absl::InternalError("a weight overflowed");
    }
    for (size_t j = 0; j < push.indices.size(); ++j) {
      chunk.weights[push.indices[j]] = (*out)[j];
    }
    optimizer.FinishSelectedUpdate(&chunk.state);
  }
  return absl::OkStatus();
}

absl::Status ApplyDense(const Optimizer& optimizer,
                        std::vector<ApplyChunk>* chunks) {
  for (ApplyChunk& chunk : *chunks) {
    optimizer.Apply(absl::MakeSpan(chunk.weights), chunk.dense_gradient,
                    &chunk.state);
  }
  KeepMemory(chunks->data());
  return absl::OkStatus();
}

absl::StatusOr<ApplyResultRow> MeasureRule(const ServerBenchConfig& config,
                                           double density, bool adam) {
  const Optimizer optimizer(RuleSettings(adam));
  std::vector<ApplyChunk> chunks = BuildChunks(config, density, adam);
  ApplyResultRow row;
  row.rule = adam ? "adam_frozen" : "sgd";
  for (const ApplyChunk& chunk : chunks) {
    row.selected += chunk.pushes[0].indices.size();
    row.numel += chunk.weights.size();
  }
  std::vector<float> out;
  size_t calls = 0;
  absl::StatusOr<Timing> sparse = MeasureMedian(config.timing, [&] {
    return ApplySparse(optimizer, calls++ % kPushesPerChunk, &chunks, &out);
  });
  if (!sparse.ok()) return sparse.status();
  absl::StatusOr<Timing> dense = MeasureMedian(
      config.timing, [&] { return ApplyDense(optimizer, &chunks); });
  if (!dense.ok()) return dense.status();
  row.sparse_ns_per_selected = sparse->median_seconds * 1e9 / row.selected;
  row.dense_ns_per_element = dense->median_seconds * 1e9 / row.numel;
  row.ratio = row.sparse_ns_per_selected / row.dense_ns_per_element;
  row.selected_per_s = row.selected / sparse->median_seconds;
  return row;
}

}  // namespace

absl::StatusOr<std::vector<ApplyResultRow>> MeasureApply(
    const ServerBenchConfig& config) {
  const double density =
      config.compressor == "topk" || config.compressor == "randomk"
          ? config.density
          : 0.01;
  std::vector<ApplyResultRow> rows;
  for (const bool adam : {false, true}) {
    absl::StatusOr<ApplyResultRow> row = MeasureRule(config, density, adam);
    if (!row.ok()) return row.status();
    rows.push_back(*std::move(row));
  }
  return rows;
}

void PrintApplyTable(const std::vector<ApplyResultRow>& rows, std::FILE* out) {
  std::fprintf(out,
               "apply on one core (no RPC, no locks): sparse ns/sel: one "
               "push per chunk, its selected elements applied as an "
               "ASP/SSP shard applies them; dense ns/elem: a dense "
               "gradient over every chunk, same run; ratio: sparse/dense\n"
               "%-12s %12s %14s %14s %8s %10s\n",
               "rule", "selected", "sparse_ns/sel", "dense_ns/elem", "ratio",
               "Msel/s");
  for (const ApplyResultRow& row : rows) {
    std::fprintf(out, "%-12s %12llu %14.2f %14.3f %8.1f %10.1f\n",
                 row.rule.c_str(),
                 static_cast<unsigned long long>(row.selected),
                 row.sparse_ns_per_selected, row.dense_ns_per_element,
                 row.ratio, row.selected_per_s / 1e6);
  }
}

}  // namespace gradwire::bench
