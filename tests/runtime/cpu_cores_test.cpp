// The cores a process may use: affinity mask and cgroup quota.
#include "runtime/core/cpu_cores.h"

#include <sched.h>

#include <doctest/doctest.h>

#include <thread>

using namespace gradc::runtime;

TEST_CASE("cgroup CPU limits: v2 cpu.max and v1 quota/period") {
  CHECK(parseCgroupCpuMax("200000 100000\n") == doctest::Approx(2.0));
  CHECK(parseCgroupCpuMax("150000 100000") == doctest::Approx(1.5));
  CHECK_FALSE(parseCgroupCpuMax("max 100000\n").has_value());  // no limit
  CHECK_FALSE(parseCgroupCpuMax("").has_value());
  CHECK_FALSE(parseCgroupCpuMax("garbage").has_value());
  CHECK_FALSE(parseCgroupCpuMax("100000 0").has_value());
  CHECK(parseCgroupV1Quota("50000\n", "100000\n") == doctest::Approx(0.5));
  CHECK_FALSE(parseCgroupV1Quota("-1\n", "100000\n").has_value());
}

TEST_CASE("available cores follow the affinity mask") {
  const int all = availableCores();
  CHECK(all >= 1);
  CHECK(all <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // Pinned to one CPU, the process has one core, whatever the machine has.
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  REQUIRE(first >= 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  CHECK(availableCores() == 1);
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK(availableCores() == all);
}
