// Reading the small kernel-provided text files of /proc and /sys (cgroup limits, meminfo),
// whose reported size is 0, so runtime/io/atomic_file.h's readFile (sized by fstat) cannot.
#pragma once

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace gradc::runtime {

inline std::optional<std::string> readSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace gradc::runtime
