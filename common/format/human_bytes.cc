#include "common/format/human_bytes.h"

#include "absl/strings/str_format.h"

namespace gradwire {

std::string HumanBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%d B", bytes)
                   : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

double CompressionRatio(uint64_t dense, uint64_t sent) {
  return sent == 0 ? 0.0 : static_cast<double>(dense) / sent;
}

}  // namespace gradwire
