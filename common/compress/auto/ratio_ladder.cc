#include "common/compress/auto/ratio_ladder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace {

constexpr double kTopKRatios[kHalfRung] = {0.001, 0.002, 0.005, 0.01,
                                           0.02,  0.05,  0.1};

double ValueBytes(ValuePrecision precision) {
  return precision == ValuePrecision::kFp32 ? 4.0 : 2.0;
}

}  // namespace

double RungRatio(Rung rung) {
  if (rung >= kFullRung) return 1.0;
  if (rung == kHalfRung) return 0.5;
  return kTopKRatios[std::max(rung, 0)];
}

std::string RungName(Rung rung, ValuePrecision precision) {
  if (rung >= kFullRung) return "fp32";
  if (rung == kHalfRung) {
    return precision == ValuePrecision::kBf16 ? "bf16" : "fp16";
  }
  return absl::StrCat("topk ", RungRatio(rung) * 100, "%");
}

double RungPayloadBytes(Rung rung, uint64_t numel, uint64_t min_kept,
                        ValuePrecision precision) {
  const double n = static_cast<double>(numel);
  if (rung >= kFullRung) return 4.0 * n;
  if (rung == kHalfRung) return 2.0 * n;
  const double ratio = RungRatio(rung);
  const double kept =
      std::min(n, std::max(std::round(ratio * n),
                           static_cast<double>(std::min(min_kept, numel))));
  // A delta between kept indices averages numel / kept; a varint carries 7
  // bits per byte.
  const double gap = kept > 0 ? n / kept : 1.0;
  const double index_bytes = std::max(1.0, std::ceil(std::log2(gap + 1) / 7));
  return kept * (ValueBytes(precision) + index_bytes);
}

CompressorOptions RungCompressorOptions(Rung rung,
                                        const CompressorOptions& base) {
  CompressorOptions options = base;
  options.k.reset();
  options.dgc = DgcOptions();
  if (rung >= kFullRung) {
    options.name = "none";
    options.precision = ValuePrecision::kFp32;
  } else if (rung == kHalfRung) {
    options.name = base.precision == ValuePrecision::kBf16 ? "bf16" : "fp16";
  } else {
    options.name = "topk";
    options.ratio = RungRatio(rung);
  }
  return options;
}

}  // namespace gradwire
