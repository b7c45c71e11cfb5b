// The mean rule, w = g: a chunk's weights become the step's mean gradient
// (v1::OPTIMIZER_KIND_MEAN). The shards run no optimizer; each worker runs
// its own on what it pulls, and holds no replica of the shards' weights.
//
// Every update moves every element (an element the step's pushes left at
// zero becomes zero), so there is no selected-elements path, and the rule
// keeps no state. A BSP step's mean is the sum of each push's share,
// 0 + (1/W) * g_1 + ... (ChunkUpdater::Accumulate), which the copy hands on
// bit for bit: with two workers it is the (a / 2 + b / 2) of an all-reduce
// whose buckets are divided by the world size first, as DDP's are.
#include <algorithm>
#include <cassert>
#include <memory>

#include "absl/types/span.h"
#include "server/shard/optimizer.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {
namespace {

class MeanRule final : public OptimizerRule {
 public:
  void Apply(double /*lr*/, absl::Span<float> weights,
             absl::Span<const float> gradient,
             OptimizerState* /*state*/) const override {
    assert(weights.size() == gradient.size());
    std::copy(gradient.begin(), gradient.end(), weights.begin());
  }

  bool UpdatesOnlySelected(uint64_t /*update*/) const override { return false; }
};

}  // namespace

std::unique_ptr<OptimizerRule> MakeMeanRule() {
  return std::make_unique<MeanRule>();
}

}  // namespace gradwire
