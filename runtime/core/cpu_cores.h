// The cores this process may actually use: the CPUs of its affinity mask (taskset, cpusets,
// Slurm's binding), capped by its cgroup's CPU quota (containers, `docker --cpus`, systemd
// CPUQuota), rounded up. std::thread::hardware_concurrency counts every CPU of the machine,
// which oversubscribes a container or a pinned job. The launcher divides these cores among the
// local ranks, and the compiler plans each rank's kernels for that many threads.
#pragma once

#include <optional>
#include <string_view>

namespace gradc::runtime {

// At least 1.
int availableCores();

// The CPU limit of a cgroup v2 `cpu.max` line ("200000 100000" -> 2.0; "max 100000" or
// malformed -> nullopt, no limit).
std::optional<double> parseCgroupCpuMax(std::string_view text);
// The same from cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us (quota -1: no limit).
std::optional<double> parseCgroupV1Quota(std::string_view quota, std::string_view period);

}  // namespace gradc::runtime
