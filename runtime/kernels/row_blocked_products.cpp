#include "runtime/kernels/row_blocked_products.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>

#include <algorithm>

#include "runtime/kernels/host_products.h"

namespace gradc::runtime {

namespace {
void product(at::Tensor out, const at::Tensor& x, const at::Tensor& rhs, const at::Tensor* bias) {
  if (bias) at::addmm_out(out, *bias, x, rhs);
  else at::mm_out(out, x, rhs);
}
}  // namespace

void productInRowBlocks(const at::Tensor& out2d, const at::Tensor& x2d, const at::Tensor& rhs,
                        const at::Tensor* bias) {
  const std::int64_t rows = x2d.size(0);
  if (hostProduct(out2d, x2d, rhs, bias)) return;
  if (rows <= kProductRowBlock) return product(out2d, x2d, rhs, bias);
  for (std::int64_t begin = 0; begin < rows; begin += kProductRowBlock) {
    const std::int64_t n = std::min(kProductRowBlock, rows - begin);
    product(out2d.narrow(0, begin, n), x2d.narrow(0, begin, n), rhs, bias);
  }
}

}  // namespace gradc::runtime
