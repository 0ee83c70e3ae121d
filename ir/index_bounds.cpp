#include "ir/index_bounds.h"

namespace gradc::ir {

std::optional<IndexBound> indexBound(const Value& value) {
  std::optional<IndexBound> best;
  for (const Use& use : value.uses()) {
    const Node& node = *use.user;
    // Views (a micro-batch's slice of the input, a reshape) hold the same values: their users
    // constrain the input too.
    if (node.op().view)
      for (size_t r = 0; r < node.numResults(); ++r)
        if (std::optional<IndexBound> b = indexBound(*node.result(r)); b && (!best || b->bound < best->bound))
          best = b;
    if (!node.op().indexBound) continue;
    std::vector<TensorType> types = node.operandTypes();
    std::optional<std::int64_t> b = node.op().indexBound(OpContext{types, node.attrs()}, use.operandIndex);
    if (b && (!best || *b < best->bound)) best = IndexBound{*b, node.specName(), std::string(node.opName())};
  }
  return best;
}

}  // namespace gradc::ir
