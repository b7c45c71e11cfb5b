// How much memory this process may use, as the kernel will enforce it: the
// memory limit of its cgroup (v2 memory.max, or v1 memory.limit_in_bytes)
// where one is set, otherwise the host's physical memory. A shard checks
// its model state against it at Init (ShardOptions::memory_limit_bytes),
// so that a model too large for its pod or host is refused at start-up
// rather than killed by the kernel mid-run.
#ifndef GRADWIRE_SERVER_PROCESS_MEMORY_LIMIT_H_
#define GRADWIRE_SERVER_PROCESS_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

namespace gradwire {

// The smaller of the cgroup limit and the physical memory; 0 when neither
// can be read. Reads /sys/fs/cgroup and sysconf; thread-safe.
uint64_t DetectMemoryLimitBytes();

// The limit a cgroup file's text states: "max" (v2) or a value of 2^60 and
// more (v1's "unlimited") is none, 0; so is text that is not a number.
uint64_t ParseCgroupMemoryLimit(const std::string& text);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_PROCESS_MEMORY_LIMIT_H_
