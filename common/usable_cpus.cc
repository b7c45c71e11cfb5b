#include "common/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gradwire {
namespace {

// A CPU quota: `quota` microseconds of CPU time every `period`.
struct Quota {
  int64_t quota = 0;
  int64_t period = 0;
  int64_t Cpus() const { return (quota + period - 1) / period; }
};

// The first line of `path`; nullopt when it cannot be read.
std::optional<std::string> FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(line));
}

std::optional<Quota> MakeQuota(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return Quota{quota, period};
}

// cgroup v2 `cpu.max` in `dir`: "max PERIOD" (no limit) or "QUOTA PERIOD".
std::optional<Quota> ReadCpuMax(const std::string& dir) {
  const std::optional<std::string> line = FirstLine(dir + "/cpu.max");
  if (!line) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(*line, ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period)) {
    return std::nullopt;
  }
  return MakeQuota(quota, period);
}

// cgroup v1 `cpu.cfs_quota_us` (-1: no limit) and `cpu.cfs_period_us`.
std::optional<Quota> ReadCfsQuota(const std::string& dir) {
  const std::optional<std::string> quota_line =
      FirstLine(dir + "/cpu.cfs_quota_us");
  const std::optional<std::string> period_line =
      FirstLine(dir + "/cpu.cfs_period_us");
  int64_t quota = 0, period = 0;
  if (!quota_line || !period_line || !absl::SimpleAtoi(*quota_line, &quota) ||
      !absl::SimpleAtoi(*period_line, &period)) {
    return std::nullopt;
  }
  return MakeQuota(quota, period);
}

// The smaller of two quotas, by the CPUs they allow.
std::optional<Quota> Tighter(std::optional<Quota> a, std::optional<Quota> b) {
  if (!a) return b;
  if (!b) return a;
  return a->Cpus() <= b->Cpus() ? a : b;
}

// The tightest quota on the v2 cgroup `path` below `root` and on each of
// its ancestors, then v1's at the root's cpu controller.
std::optional<Quota> FindQuota(const std::string& root,
                               absl::string_view path) {
  std::optional<Quota> tightest = ReadCpuMax(root);
  std::string dir = root;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    dir = absl::StrFormat("%s/%s", dir, part);
    tightest = Tighter(tightest, ReadCpuMax(dir));
  }
  if (tightest) return tightest;
  return Tighter(ReadCfsQuota(root + "/cpu"),
                 ReadCfsQuota(root + "/cpu,cpuacct"));
}

// CPUs in this process's affinity mask; the hardware threads if unknown.
int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The process's cgroup v2 path ("0::/a/b" in /proc/self/cgroup), or "".
std::string OwnCgroupPath() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "0::")) return std::string(rest);
  }
  return "";
}

}  // namespace

UsableCpuCount CountUsableCpus(const std::string& cgroup_root,
                               int affinity_cpus,
                               absl::string_view cgroup_path) {
  const int affinity = std::max(1, affinity_cpus);
  const std::optional<Quota> quota = FindQuota(cgroup_root, cgroup_path);
  UsableCpuCount count;
  if (quota && quota->Cpus() < affinity) {
    count.cpus = static_cast<int>(std::max<int64_t>(1, quota->Cpus()));
    count.why =
        absl::StrFormat("cgroup CPU quota %d/%d us of %d in the affinity mask",
                        quota->quota, quota->period, affinity);
  } else {
    count.cpus = affinity;
    count.why =
        quota ? absl::StrFormat(
                    "affinity mask; cgroup CPU quota %d/%d us allows more",
                    quota->quota, quota->period)
              : "affinity mask; no cgroup CPU quota";
  }
  return count;
}

UsableCpuCount CountUsableCpus() {
  return CountUsableCpus("/sys/fs/cgroup", AffinityCpus(), OwnCgroupPath());
}

}  // namespace gradwire
