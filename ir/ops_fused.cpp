// The op table's `fused` op: a region of elementwise ops executed as one generated kernel.
//
// fused(operands...){body} computes its body (ir/fused_body.h) over one iteration space and
// returns the body's returned steps. Its rules are its steps' rules: the result types are the
// returned steps' types, the FLOPs are the sum of the steps' FLOPs, and there is no workspace --
// the generated kernel (codegen/) keeps every intermediate in registers and writes only the
// results. It reads every operand in place through the strides its optional `strides` attribute
// names (ir/fused_body.h fusedOperandStrides; contiguous without it), so the planner models no
// hidden copies for it.
#include <string>

#include "ir/fused_body.h"
#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

Results inferFused(const OpContext& c) {
  Expected<std::shared_ptr<const FusedBody>> body = cachedFusedBody(*getString(c.attrs, "body"));
  if (!body) return body.error();
  Expected<std::vector<TensorType>> steps = inferFusedSteps(**body, c.inputs);
  if (!steps) return steps.error();
  if (Expected<std::vector<std::vector<std::int64_t>>> strides = fusedOperandStrides(c.attrs, c.inputs); !strides)
    return fail(strides.error().message);
  const Shape& space = (*steps)[0].shape;
  for (const TensorType& in : c.inputs)
    if (std::optional<Shape> joint = broadcastShapes(in.shape, space); !joint || *joint != space)
      return fail("operand " + typeStr(in) + " does not broadcast to the iteration space " + typeStr((*steps)[0]));
  std::vector<TensorType> results;
  for (int s : (*body)->outputs) results.push_back((*steps)[static_cast<size_t>(s)]);
  return results;
}

std::int64_t flopsFused(const OpContext& c, Types) {
  Expected<std::shared_ptr<const FusedBody>> body = cachedFusedBody(*getString(c.attrs, "body"));
  if (!body) return 0;
  Expected<std::vector<TensorType>> steps = inferFusedSteps(**body, c.inputs);
  if (!steps) return 0;
  std::int64_t total = 0;
  for (size_t i = 0; i < (*body)->steps.size(); ++i) {
    const FusedStep& step = (*body)->steps[i];
    std::vector<TensorType> operandTypes;
    for (const FusedOperand& o : step.operands) operandTypes.push_back(o.isInput ? c.inputs[o.index] : (*steps)[o.index]);
    total = saturatingAdd(total, opFlops(*step.op, operandTypes, step.attrs, std::span<const TensorType>(&(*steps)[i], 1)));
  }
  return total;
}

}  // namespace

std::vector<OpInfo> fusedOps() {
  return {
      {.name = "fused", .minInputs = 1, .maxInputs = kVariadic,
       .attrs = {{"body", AttrKind::String, true, "the region's elementwise steps (ir/fused_body.h)"},
                 {"strides", AttrKind::IntList, false,
                  "each operand's strides in elements, operand after operand; absent: all contiguous"}},
       .infer = inferFused, .flops = flopsFused, .stridedReads = StridedReads::InPlace,
       .role = OpRole::FusedRegion,
       .summary = "a region of elementwise ops run as one generated kernel; intermediates never stored"},
  };
}

}  // namespace gradc::ir
