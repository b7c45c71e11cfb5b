// How many CPUs this process may really use: the CPUs its affinity mask
// allows, capped by its cgroup's CPU quota. In a container limited to two
// CPUs on a 64-core host, std::thread::hardware_concurrency() says 64 and a
// pool sized from it runs 64 threads on two CPUs' worth of time, each
// throttled in turn; thread pools size themselves from UsableCpus()
// instead.
//
// The quota is read from cgroup v2 (`cpu.max`: "QUOTA PERIOD" or "max
// PERIOD"), in the process's own cgroup and each of its ancestors (the
// smallest limits), or else from cgroup v1 (`cpu.cfs_quota_us`, -1 for
// none, and `cpu.cfs_period_us`, under the `cpu` or `cpu,cpuacct`
// controller's mount). A quota allows ceil(quota / period) CPUs. Missing or
// unreadable files mean no limit.
//
// Thread safety: every function is safe to call from any thread; each call
// reads the files again.
#ifndef GRADWIRE_COMMON_USABLE_CPUS_H_
#define GRADWIRE_COMMON_USABLE_CPUS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gradwire {

// The count, and why it is that count, for a log line: e.g. "8 CPUs (cgroup
// quota 750000/100000 us of 16 in the affinity mask)".
struct UsableCpuCount {
  int cpus = 1;
  std::string why;
};

// For this process: the affinity mask (sched_getaffinity; the machine's
// hardware threads if that fails) capped by the quota of its cgroup under
// /sys/fs/cgroup. At least 1.
UsableCpuCount CountUsableCpus();
inline int UsableCpus() { return CountUsableCpus().cpus; }

// The same with the cgroup filesystem at `cgroup_root` (a v2 hierarchy, or
// a v1 one with `cpu` or `cpu,cpuacct` below it), `affinity_cpus` CPUs in
// the affinity mask, and `cgroup_path` ("/a/b", or "" or "/" for the root)
// the process's v2 cgroup below the root. At least 1, at most
// max(1, affinity_cpus).
UsableCpuCount CountUsableCpus(const std::string& cgroup_root,
                               int affinity_cpus,
                               absl::string_view cgroup_path = "");

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_USABLE_CPUS_H_
