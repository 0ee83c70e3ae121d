// Host copies of a step's 0-dim operands (learning rate, step, gradient scale), read from the
// tensor once per step and shared by every kernel that reads them.
//
// The optimizer's kernels need these values on the host (as the factors of their ATen calls, as
// torch.optim passes Python floats). Read per kernel, an optimizer step over P parameters would
// read each of them P times: on a GPU, P synchronisations with the device per step. Keyed by the
// IR value (each is computed once per step), a value is read once, by its first reader. The
// executor makes one per run (RunContext::scalars), so nothing carries over between steps.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <unordered_map>

#include "ir/graph.h"

namespace gradc::runtime {

class StepScalars {
 public:
  // The value of `tensor`, the step's value of `value`: read from the tensor the first time.
  double value(const ir::Value* value, const at::Tensor& tensor) {
    auto [it, inserted] = values_.try_emplace(value, 0.0);
    if (inserted) {
      it->second = tensor.item<double>();
      ++reads_;
    }
    return it->second;
  }
  // How many values were read from their tensors.
  std::int64_t reads() const { return reads_; }

 private:
  std::unordered_map<const ir::Value*, double> values_;  // lookups only, never iterated
  std::int64_t reads_ = 0;
};

}  // namespace gradc::runtime
