#include "common/consistency/consistency_rule.h"

#include "common/consistency/asp_rule.h"
#include "common/consistency/bsp_rule.h"
#include "common/consistency/ssp_rule.h"

namespace gradwire {

std::unique_ptr<ConsistencyRule> MakeConsistencyRule(v1::ConsistencyMode mode,
                                                     uint32_t staleness) {
  switch (mode) {
    case v1::CONSISTENCY_MODE_ASP:
      return std::make_unique<AspRule>();
    case v1::CONSISTENCY_MODE_SSP:
      return std::make_unique<SspRule>(staleness);
    default:
      return std::make_unique<BspRule>();
  }
}

}  // namespace gradwire
