#ifndef GRADWIRE_BENCH_COMMON_SYNTHETIC_GRADIENT_H_
#define GRADWIRE_BENCH_COMMON_SYNTHETIC_GRADIENT_H_

#include <cstdint>

#include "absl/types/span.h"

namespace gradwire::bench {

// Fills `out` with values uniform in [-1, 1), a pure function of (seed,
// stream): the same arguments give the same gradient on every run. What a
// shard does with a push does not depend on the value distribution, and a
// hash is far cheaper than a gaussian draw for tens of workers x millions of
// elements x several gradients.
void FillSyntheticGradient(uint64_t seed, uint64_t stream,
                           absl::Span<float> out);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMMON_SYNTHETIC_GRADIENT_H_
