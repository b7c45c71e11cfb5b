#include "common/compress/registry.h"

#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/compress/builtin.h"

namespace gradwire {
namespace {

using Factory = std::unique_ptr<Compressor> (*)(CompressorOptions);

const std::map<std::string, Factory>& Factories() {
  static const auto* factories = new std::map<std::string, Factory>{
      {"none", MakeDenseCompressor},
      {"fp16", MakeDenseCompressor},
      {"bf16", MakeDenseCompressor},
      {"topk", MakeTopKCompressor},
      {"randomk", MakeRandomKCompressor},
      {"threshold", MakeThresholdCompressor},
      {"nonzero", MakeNonzeroCompressor},
      {"dgc", MakeDgcCompressor},
      {"qsgd", MakeQsgdCompressor},
      {"onebit", MakeOneBitCompressor},
  };
  return *factories;
}

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("compressor %s: %s", name, what));
}

absl::Status ValidateOptions(const CompressorOptions& o) {
  if (IsSparsifier(o.name) && !o.k.has_value() &&
      !(o.ratio > 0.0 && o.ratio <= 1.0)) {
    return Invalid(o.name,
                   absl::StrFormat("ratio %g is outside (0, 1]", o.ratio));
  }
  if (o.name == "threshold" &&
      !(std::isfinite(o.threshold) && o.threshold >= 0.0f)) {
    return Invalid(
        o.name,
        absl::StrFormat("threshold %g must be finite and >= 0", o.threshold));
  }
  if (o.name == "qsgd" && (o.levels < 1 || o.levels > 65535)) {
    return Invalid(
        o.name, absl::StrFormat("levels %d is outside [1, 65535]", o.levels));
  }
  const uint32_t bucket = o.name == "qsgd"     ? o.qsgd_bucket
                          : o.name == "onebit" ? o.onebit_bucket
                                               : 0;
  if (bucket % 64 != 0) {
    return Invalid(o.name,
                   absl::StrFormat("bucket %d is not a multiple of 64 (0: one "
                                   "scale per chunk)",
                                   bucket));
  }
  if (o.name == "dgc") {
    const DgcOptions& d = o.dgc;
    if (!(d.momentum >= 0.0f && d.momentum < 1.0f)) {
      return Invalid(
          o.name, absl::StrFormat("momentum %g is outside [0, 1)", d.momentum));
    }
    if (!(d.clip_norm >= 0.0f && std::isfinite(d.clip_norm))) {
      return Invalid(
          o.name,
          absl::StrFormat("clip norm %g must be finite and >= 0", d.clip_norm));
    }
    if (d.warmup_epochs < 0) {
      return Invalid(o.name, absl::StrFormat("warm-up epochs %d is negative",
                                             d.warmup_epochs));
    }
    if (!(d.sample_ratio > 0.0 && d.sample_ratio <= 1.0)) {
      return Invalid(
          o.name,
          absl::StrFormat("sample ratio %g is outside (0, 1]", d.sample_ratio));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsSparsifier(const std::string& name) {
  return name == "topk" || name == "randomk" || name == "dgc";
}

absl::StatusOr<std::unique_ptr<Compressor>> MakeCompressor(
    const CompressorOptions& options) {
  const auto it = Factories().find(options.name);
  if (it == Factories().end()) {
    return absl::NotFoundError(
        absl::StrFormat("unknown compressor '%s'; known: %s", options.name,
                        absl::StrJoin(CompressorNames(), ", ")));
  }
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  return it->second(options);
}

std::vector<std::string> CompressorNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Factories()) names.push_back(name);
  return names;
}

}  // namespace gradwire
