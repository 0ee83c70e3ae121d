#include "runtime/device/host_memory.h"

#include "ir/byte_format.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "runtime/core/small_file.h"

namespace gradc::runtime {
namespace {

std::string_view trim(std::string_view t) {
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  return t;
}

std::optional<std::int64_t> integer(std::string_view t) {
  t = trim(t);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v < 0) return std::nullopt;
  return v;
}

// What the cgroup still allows: limit - usage, or nullopt without a limit.
std::optional<std::int64_t> cgroupRoom(const char* limitPath, const char* usagePath) {
  std::optional<std::string> limitText = readSmallFile(limitPath);
  if (!limitText) return std::nullopt;
  std::optional<std::int64_t> limit = parseCgroupMemoryLimit(*limitText);
  if (!limit) return std::nullopt;
  std::optional<std::string> usageText = readSmallFile(usagePath);
  std::optional<std::int64_t> usage = usageText ? integer(*usageText) : std::nullopt;
  return std::max<std::int64_t>(0, *limit - usage.value_or(0));
}

}  // namespace

std::string describeBytes(std::int64_t bytes) { return ir::formatBytesExact(bytes); }

std::optional<std::int64_t> parseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  size_t at = meminfo.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = meminfo.substr(at + key.size());
  rest = rest.substr(0, rest.find('\n'));
  rest = trim(rest);
  if (rest.size() < 3 || rest.substr(rest.size() - 2) != "kB") return std::nullopt;
  std::optional<std::int64_t> kb = integer(rest.substr(0, rest.size() - 2));
  if (!kb || *kb > (INT64_MAX >> 10)) return std::nullopt;
  return *kb << 10;
}

std::optional<std::int64_t> parseCgroupMemoryLimit(std::string_view text) {
  text = trim(text);
  if (text == "max") return std::nullopt;
  std::optional<std::int64_t> v = integer(text);
  // cgroup v1 says "no limit" with the largest page-aligned int64.
  if (!v || *v >= (std::int64_t{1} << 62)) return std::nullopt;
  return v;
}

std::optional<HostMemory> availableHostMemory() {
  std::optional<HostMemory> out;
  if (std::optional<std::string> meminfo = readSmallFile("/proc/meminfo"))
    if (std::optional<std::int64_t> bytes = parseMemAvailable(*meminfo)) out = HostMemory{*bytes, "MemAvailable"};
  std::optional<std::int64_t> room = cgroupRoom("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current");
  if (!room) room = cgroupRoom("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes");
  if (room && (!out || *room < out->availableBytes)) out = HostMemory{*room, "the cgroup's memory limit"};
  return out;
}

}  // namespace gradc::runtime
