// One op run through the runtime's kernel table, with what it allocated beside its arguments and
// what the op table declares as its workspace for the same types: for tests that hold a kernel's
// allocation to its declaration (result + declared workspace, + any copy the planner counts).
// Include it after <doctest/doctest.h>, and LibTorch's headers before that (c10 defines a CHECK
// of its own that the test files #undef before doctest's).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/op_table.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

namespace gradc::testing {

struct OpRun {
  at::Tensor result;        // the op's first result
  std::int64_t allocated;   // the peak of what the kernel allocated, results included
  std::int64_t declared;    // the op table's workspace for these types
};

inline ir::TensorType irTypeOf(const at::Tensor& t) {
  return {*runtime::fromScalarType(t.scalar_type()), ir::Shape(t.sizes().begin(), t.sizes().end())};
}

inline OpRun runOp(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs = {}) {
  runtime::MemoryTracker::install();
  const std::int64_t before = runtime::MemoryTracker::outsideBytes();
  runtime::MemoryTracker::resetOutsidePeak();
  Expected<std::vector<at::Tensor>> r = runtime::callOp(op, operands, attrs);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  OpRun run{(*r)[0], runtime::MemoryTracker::outsidePeakBytes() - before, 0};
  std::vector<ir::TensorType> in;
  for (const at::Tensor& t : operands) in.push_back(irTypeOf(t));
  const std::vector<ir::TensorType> out{irTypeOf(run.result)};
  run.declared = ir::opWorkspaceBytes(*ir::findOp(op), in, attrs, out, at::get_num_threads());
  return run;
}

}  // namespace gradc::testing
