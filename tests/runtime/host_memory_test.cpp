// What the memory preflight reads: MemAvailable and cgroup memory limits.
#include "runtime/device/host_memory.h"

#include <doctest/doctest.h>

using namespace gradc::runtime;

TEST_CASE("host memory: MemAvailable and cgroup limits parse, garbage does not") {
  const char* meminfo =
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   22483796 kB\nBuffers: 1 kB\n";
  CHECK(parseMemAvailable(meminfo) == std::int64_t{22483796} * 1024);
  CHECK_FALSE(parseMemAvailable("MemTotal: 10 kB\n").has_value());  // kernels before 3.14
  CHECK_FALSE(parseMemAvailable("MemAvailable: lots\n").has_value());
  CHECK_FALSE(parseMemAvailable("MemAvailable: 12 MB\n").has_value());
  CHECK(parseCgroupMemoryLimit("8589934592\n") == std::int64_t{8589934592});
  CHECK_FALSE(parseCgroupMemoryLimit("max\n").has_value());
  CHECK_FALSE(parseCgroupMemoryLimit("9223372036854771712\n").has_value());  // cgroup v1: no limit
  CHECK_FALSE(parseCgroupMemoryLimit("-5").has_value());
  CHECK_FALSE(parseCgroupMemoryLimit("").has_value());
  // This host: something positive, from one of the two sources.
  std::optional<HostMemory> host = availableHostMemory();
  REQUIRE(host.has_value());
  CHECK(host->availableBytes > 0);
  CHECK((host->source == "MemAvailable" || host->source == "the cgroup's memory limit"));
  CHECK(describeBytes(512) == "512 B");
  CHECK(describeBytes(std::int64_t{3} << 30) == "3.0 GiB (3,221,225,472 bytes)");
}
