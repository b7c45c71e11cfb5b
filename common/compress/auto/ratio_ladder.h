// The rungs compressor "auto" chooses among, from the fewest bytes to the
// most: Top-K at 0.1%, 0.2%, 0.5%, 1%, 2%, 5% and 10% of the elements
// (values at the push's precision, indices delta-varint), dense 16-bit
// (fp16, or bf16 when the push's precision is bf16) and dense fp32.
// Quantising the choice to these rungs keeps a noisy estimate from moving
// a layer's ratio a little every step, and each rung is a compressor the
// shards already decode.
//
// 1-bit sign is not a rung: its 1/8 byte per element lies between Top-K
// 2% and 5%, and under the worker-side momentum that "auto" runs with
// (sync_settings.h) a sign compressor diverges (docs/convergence.md).
//
// Thread safety: constants and pure functions.
#ifndef GRADWIRE_COMMON_COMPRESS_AUTO_RATIO_LADDER_H_
#define GRADWIRE_COMMON_COMPRESS_AUTO_RATIO_LADDER_H_

#include <cstdint>
#include <string>

#include "common/compress/compressor.h"

namespace gradwire {

// A rung's index in the ladder, 0 (Top-K 0.1%) to kRungCount - 1 (fp32).
using Rung = int;

inline constexpr int kRungCount = 9;
inline constexpr Rung kHalfRung = 7;  // Dense fp16 / bf16.
inline constexpr Rung kFullRung = 8;  // Dense fp32.
// Where every layer starts, before the link and the compute are measured:
// Top-K 1%, the project's default.
inline constexpr Rung kStartRung = 3;

// The rung's ratio as the metric and the summary show it: the fraction
// Top-K keeps; 0.5 for dense 16-bit and 1 for dense fp32, so that the
// number grows with the bytes.
double RungRatio(Rung rung);

// "topk 0.1%", ..., "topk 10%", "fp16" (or "bf16"), "fp32".
std::string RungName(Rung rung, ValuePrecision precision);

// The payload bytes a chunk of `numel` elements costs at `rung`: Top-K
// keeps max(round(ratio * numel), min(min_kept, numel)) elements at
// `precision` plus their delta-varint indices (about log2(1 / ratio) / 7
// bytes each); dense rungs cost 2 or 4 bytes per element. Estimates, for
// comparing rungs; the link is measured from what was really sent.
double RungPayloadBytes(Rung rung, uint64_t numel, uint64_t min_kept,
                        ValuePrecision precision);

// The compressor options of `rung`: `base` (its min_kept, precision,
// non-finite policy and seed) with the rung's name and ratio.
CompressorOptions RungCompressorOptions(Rung rung,
                                        const CompressorOptions& base);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_AUTO_RATIO_LADDER_H_
