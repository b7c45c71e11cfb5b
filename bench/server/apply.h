// The shard's optimizer apply alone, on one core, no RPC and no locks: how
// long the scattered apply of a sparse push's selected elements takes per
// element, against the dense apply per element measured in the same run.
//
// The model (config.numel floats, cut into config.partition_bytes chunks)
// gets, per timed call, one push per chunk carrying config.density of its
// elements at distinct positions drawn uniformly (where a Top-K of a noisy
// gradient lands). Each chunk has 8 such pushes, taken in turn, so that a
// call does not find its positions' lines left in the caches by the call
// before, as a shard does not when each step's Top-K moves: a host whose
// last-level cache holds the whole model still serves them from there, not
// from the caches nearer the core. The push is applied the way a shard
// applies an ASP/SSP sparse push under a rule that moves only the selected
// elements: plain SGD in place at the positions
// (Optimizer::ApplySgdAtValues, once the weights' bound proves the update
// finite); frozen Adam with Optimizer::ApplyAt into a buffer aside, its
// finiteness checked, then stored at the positions. The dense baseline is
// Optimizer::Apply of a dense gradient over every chunk.
//
// Thread safety: none; one measurement at a time.
#ifndef GRADWIRE_BENCH_SERVER_APPLY_H_
#define GRADWIRE_BENCH_SERVER_APPLY_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/server/config.h"

namespace gradwire::bench {

struct ApplyResultRow {
  // "sgd" (plain SGD) or "adam_frozen" (1-bit Adam past its freeze: one
  // state element, the second moment, read per selected element).
  std::string rule;
  // Selected elements per timed call (over every chunk) and the model's.
  uint64_t selected = 0;
  uint64_t numel = 0;
  // Median over timed calls, on one thread.
  double sparse_ns_per_selected = 0.0;
  double dense_ns_per_element = 0.0;
  // sparse_ns_per_selected / dense_ns_per_element: how many dense elements
  // one selected element costs.
  double ratio = 0.0;
  // Sparse selected elements per second on this one core.
  double selected_per_s = 0.0;
};

// Measures both rules at config.density (a sparsifier's density; 0.01 for
// a dense compressor, whose pushes select every element). Errors come from
// MeasureMedian.
absl::StatusOr<std::vector<ApplyResultRow>> MeasureApply(
    const ServerBenchConfig& config);

// The table of MeasureApply's rows.
void PrintApplyTable(const std::vector<ApplyResultRow>& rows, std::FILE* out);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_APPLY_H_
