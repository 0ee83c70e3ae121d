// What the kernel benchmarks share for timing: one call's wall time and the median of several.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace gradc::bench {

inline double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace gradc::bench
