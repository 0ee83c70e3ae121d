// The memory this process can still take on its host: the kernel's estimate of what can be
// allocated without swapping (MemAvailable in /proc/meminfo), capped by the process's cgroup
// (v2 memory.max - memory.current, or v1 memory.limit_in_bytes - memory.usage_in_bytes): the
// figure `gradc train` checks a plan against before it allocates anything, so that a step that
// cannot fit is refused with both numbers instead of being killed by the OOM killer halfway.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gradc::runtime {

struct HostMemory {
  std::int64_t availableBytes = 0;
  std::string source;  // "MemAvailable" or "the cgroup's memory limit"
};

// nullopt when neither source can be read (then nothing is checked).
std::optional<HostMemory> availableHostMemory();

// "47.7 GiB (51,212,345,344 bytes)" for messages that compare sizes.
std::string describeBytes(std::int64_t bytes);

// The pure parts, for tests: MemAvailable of a /proc/meminfo text, in bytes; a cgroup limit
// ("max", or v1's near-2^63 "unlimited", -> nullopt).
std::optional<std::int64_t> parseMemAvailable(std::string_view meminfo);
std::optional<std::int64_t> parseCgroupMemoryLimit(std::string_view text);

}  // namespace gradc::runtime
