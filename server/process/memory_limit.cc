#include "server/process/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace gradwire {
namespace {

// cgroup v1 reports "no limit" as the largest page-aligned int64.
constexpr uint64_t kUnlimitedFrom = uint64_t{1} << 60;

uint64_t CgroupLimit(const char* path) {
  std::ifstream file(path);
  if (!file) return 0;
  std::stringstream text;
  text << file.rdbuf();
  return ParseCgroupMemoryLimit(text.str());
}

uint64_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
}

}  // namespace

uint64_t ParseCgroupMemoryLimit(const std::string& text) {
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes)) return 0;
  return bytes >= kUnlimitedFrom ? 0 : bytes;
}

uint64_t DetectMemoryLimitBytes() {
  uint64_t limit = PhysicalMemory();
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t cgroup = CgroupLimit(path);
    if (cgroup != 0) limit = limit == 0 ? cgroup : std::min(limit, cgroup);
  }
  return limit;
}

}  // namespace gradwire
