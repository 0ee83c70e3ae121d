// Inference mode: removes every dropout node (the ops marked OpInfo::evalIdentity), forwarding its input to its users (dropout is
// the identity at evaluation time, as torch.nn.Module.eval() makes it). Used by `gradc eval`.
//
// Algorithm: one pass over the nodes; each random-op node whose op is an identity at
// inference (dropout) has its result replaced by its input, then the node is erased.
// Invariant: no dropout node remains; every other node and its order are unchanged.
#pragma once

#include "passes/pass.h"

namespace gradc::passes {

class StripDropout final : public Pass {
 public:
  std::string_view name() const override { return "strip-dropout"; }
  Expected<bool> run(ir::Graph& graph) override;
};

}  // namespace gradc::passes
