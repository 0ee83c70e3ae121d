// The im2col kernel's workspace (see conv_problem.h).
#include "ir/conv_problem.h"

#include <algorithm>
#include <vector>

#include "ir/op_rules.h"
#include "ir/window_geometry.h"

namespace gradc::ir {

// One sample's im2col matrix [C/g * kh * kw, OH * OW] (none for pointwise windows); when the
// kernel puts several samples in one GEMM (convChunkSamples), the chunk's column matrix and its
// [O/g, samples * OH * OW] GEMM result or gathered gradient.
std::int64_t im2colWorkspaceBytes(const AttrMap& attrs, const TensorType& w, const TensorType& y) {
  using rules::saturatingMul;
  WindowGeometry g;
  if (readWindow(attrs, g, std::array<std::int64_t, 2>{w.shape[2], w.shape[3]})) return 0;
  const std::int64_t pixels = y.shape[2] * y.shape[3], rows = w.shape[1] * w.shape[2] * w.shape[3];
  const std::int64_t chunk = convChunkSamples(y.shape[0], pixels);
  const std::int64_t groups = getInt(attrs, "groups").value_or(1);
  if (chunk > 1) return saturatingMul(saturatingMul(rows + w.shape[0] / groups, chunk * pixels), dtypeSize(y.dtype));
  if (g.pointwise()) return 0;
  return saturatingMul(saturatingMul(rows, pixels), dtypeSize(y.dtype));
}

}  // namespace gradc::ir
