// Which values each integer graph input may hold: the tightest exclusive upper bound that its
// uses require (rows of an embedding table, classes of a loss), from the op table's
// indexBound rules. The runtime uses it to reject out-of-range data with a message that
// names the input and the layer, and to draw synthetic data in range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace gradc::ir {

struct IndexBound {
  std::int64_t bound;    // values must lie in [0, bound)
  std::string specName;  // the layer that imposes it (the tightest one)
  std::string op;
};

// nullopt when no use of the value constrains it. Uses through view ops count.
std::optional<IndexBound> indexBound(const Value& value);

}  // namespace gradc::ir
