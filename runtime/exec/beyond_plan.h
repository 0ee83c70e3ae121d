// What the executor reports of a step whose kernel allocated beyond its plan (the metrics and the
// run's notes read it: runtime/train/metrics.h).
#pragma once

#include <cstdint>
#include <string>

namespace gradc::runtime {

// A step whose kernel allocated more outside the arena than the plan gave it as workspace: the
// bytes a measured peak above the planned one comes from.
struct BeyondPlan {
  std::int64_t step = 0;
  std::string op, name;          // the node's op and spec name
  std::int64_t bytes = 0;        // the most the kernel allocated outside the arena at once
  std::int64_t workspace = 0;    // what the plan gave it
};

}  // namespace gradc::runtime
