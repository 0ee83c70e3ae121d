#include "ir/index_bounds.h"

namespace gradc::ir {

std::optional<IndexBound> indexBound(const Value& value) {
  std::optional<IndexBound> best;
  for (const Use& use : value.uses()) {
    const Node& node = *use.user;
    if (!node.op().indexBound) continue;
    std::vector<TensorType> types = node.operandTypes();
    std::optional<std::int64_t> b = node.op().indexBound(OpContext{types, node.attrs()}, use.operandIndex);
    if (b && (!best || *b < best->bound)) best = IndexBound{*b, node.specName(), std::string(node.opName())};
  }
  return best;
}

}  // namespace gradc::ir
