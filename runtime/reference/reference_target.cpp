#include "runtime/reference/reference_backend.h"

namespace gradc::runtime::reference {
namespace {

// Its ranks sum through c10d's Gloo, which has no bf16 sum.
bool glooSums(ir::DType dtype) { return dtype != ir::DType::bf16; }

}  // namespace

const ir::KernelTarget& kernelTarget() {
  static const ir::KernelTarget target({
      .name = "reference",
      .communicator = "Gloo",
      .ranks = "CPU ranks",
      .sums = glooSums,
      .kernelFormat = ir::KernelFormat::none,
      .libraryReserveBytes = 0,
      .workspace = {},  // the portable kernels': the op table's rules
  });
  return target;
}

}  // namespace gradc::runtime::reference
