// What the oneDNN wrappers of this folder share (internal to onednn/; only with GRADC_WITH_ONEDNN).
#pragma once

#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace gradc::onednn::detail {

// The one CPU engine of the process.
inline dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The attributes of every primitive here: the scratchpad is the caller's (planned memory), and
// the result does not depend on thread timing. oneDNN 3.3 and later may otherwise reduce a
// convolution's weight gradient in whatever order its threads finish, so two runs of one plan (or
// a plan with recompute against one without) would differ in the last bits; 2.x is deterministic.
inline dnnl::primitive_attr plannedAttributes() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
#if DNNL_VERSION_MAJOR > 3 || (DNNL_VERSION_MAJOR == 3 && DNNL_VERSION_MINOR >= 3)
  attr.set_deterministic(true);
#endif
  return attr;
}

// The OpenMP thread count oneDNN reads while building a descriptor, set for one scope: the
// plan's thread count when the op table asks, the run's when the runtime runs.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : before_(omp_get_max_threads()) { omp_set_num_threads(std::max(threads, 1)); }
  ~ThreadsScope() { omp_set_num_threads(before_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int before_;
};

// oneDNN's reference implementations run anywhere at a small fraction of a tuned kernel's
// speed: a problem that only has one is left to the caller's own kernel.
inline bool isReference(const char* implementation) { return std::string(implementation).rfind("ref", 0) == 0; }

}  // namespace gradc::onednn::detail
