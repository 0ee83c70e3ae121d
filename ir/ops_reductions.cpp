// The op table's reductions a spec can ask for: sum and mean over chosen axes.
//
// sum(x){dims, keepdim} and mean(x){dims, keepdim}: dims is the list of reduced axes
// (normalised, distinct, ascending; empty: every axis); keepdim keeps them as extents of 1.
// The gradient broadcasts g back over the reduced axes (passes/grad_rules.cpp), scaled by
// 1 / count for mean. mean's kernel (ATen's mean: a sum divided by a wrapped Scalar) allocates
// that Scalar as its workspace.
#include <algorithm>
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

Results inferReduction(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  std::vector<std::int64_t> dims = *getIntList(c.attrs, "dims");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= x.rank())
      return fail("axis " + std::to_string(dims[i]) + " is not an axis of " + typeStr(x) +
                  " (dims are normalised: 0 .. rank - 1)");
    if (i > 0 && dims[i] <= dims[i - 1]) return fail("dims must be distinct and ascending");
  }
  const bool keepdim = *getBool(c.attrs, "keepdim");
  Shape shape;
  for (std::int64_t a = 0; a < x.rank(); ++a) {
    const bool reduced = dims.empty() || std::binary_search(dims.begin(), dims.end(), a);
    if (!reduced) shape.push_back(x.shape[static_cast<size_t>(a)]);
    else if (keepdim) shape.push_back(1);
  }
  return std::vector<TensorType>{{x.dtype, shape}};
}

std::int64_t workspaceMean(const OpContext& c, Types) { return scalarOperandBytes(c.inputs[0].dtype); }

}  // namespace

std::vector<OpInfo> reductionOps() {
  const std::vector<AttrSpec> attrs = {
      {"dims", AttrKind::IntList, true, "reduced axes, distinct and ascending; empty: all"},
      {"keepdim", AttrKind::Bool, true, "keep the reduced axes as extents of 1"}};
  return {
      {.name = "sum", .minInputs = 1, .maxInputs = 1, .attrs = attrs, .infer = inferReduction,
       .flops = flopsPerFirstInput, .stridedReads = StridedReads::InPlace, .summary = "sum over the axes in dims"},
      {.name = "mean", .minInputs = 1, .maxInputs = 1, .attrs = attrs, .infer = inferReduction,
       .flops = flopsPerFirstInput, .workspaceBytes = workspaceMean, .stridedReads = StridedReads::InPlace,
       .summary = "mean over the axes in dims"},
  };
}

}  // namespace gradc::ir
