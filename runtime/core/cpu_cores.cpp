#include "runtime/core/cpu_cores.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <thread>

#include "runtime/core/small_file.h"

namespace gradc::runtime {
namespace {

std::optional<long long> number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The quota of this process's cgroup: v2 at the unified mount, else v1's cpu controller.
std::optional<double> cgroupLimit() {
  if (std::optional<std::string> max = readSmallFile("/sys/fs/cgroup/cpu.max")) return parseCgroupCpuMax(*max);
  std::optional<std::string> quota = readSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::optional<std::string> period = readSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (quota && period) return parseCgroupV1Quota(*quota, *period);
  return std::nullopt;
}

}  // namespace

std::optional<double> parseCgroupCpuMax(std::string_view text) {
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::optional<long long> quota = number(text.substr(0, space)), period = number(text.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // "max": no limit
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> parseCgroupV1Quota(std::string_view quotaText, std::string_view periodText) {
  std::optional<long long> quota = number(quotaText), period = number(periodText);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

int availableCores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cores = std::max(1, CPU_COUNT(&mask));
  if (std::optional<double> limit = cgroupLimit())
    cores = std::min(cores, std::max(1, static_cast<int>(std::ceil(*limit - 1e-9))));
  return cores;
}

}  // namespace gradc::runtime
