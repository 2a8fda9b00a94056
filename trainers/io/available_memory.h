// trainers/io/available_memory.h — how much memory this process may still allocate.
//
// The least of the machine's MemAvailable (/proc/meminfo), the headroom of every memory
// cgroup the process sits in (limit − usage, walked up to the hierarchy's root) and what is
// left of the process's RLIMIT_AS (ulimit -v; limit − VmSize) and RLIMIT_DATA (limit − VmData): cgroup v2
// (memory.max / memory.current, also under a hybrid layout's unified/) and cgroup v1
// (memory/…/memory.limit_in_bytes / memory.usage_in_bytes). A container or a Slurm job with a
// 4 GiB limit on a 256 GiB machine therefore gets a 4 GiB budget, not 256. When the process's
// cgroup path is not visible (a cgroup namespace shows it as "/"), the mount's root files are read.
#pragma once

#include <cstdint>
#include <string>

namespace relpos::train {

struct AvailableMemory {
  int64_t bytes = 0;   // 0: unknown (no check is made)
  std::string source;  // what bounded it, e.g. "MemAvailable" or "cgroup v2 /job/memory.max - memory.current"
};

// proc_root / cgroup_root: "/proc" and "/sys/fs/cgroup" (other roots are for tests).
AvailableMemory available_memory(const std::string& proc_root = "/proc",
                                 const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace relpos::train
