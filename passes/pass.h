// A graph transformation. run() reports whether it changed the graph (so the PassManager
// verifies and prints only after passes that did) or fails with a user-facing Error.
#pragma once

#include <memory>
#include <string_view>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  // Stable, lowercase, used on the command line (--passes dce) and in dump file names.
  virtual std::string_view name() const = 0;
  virtual Expected<bool> run(ir::Graph& graph) = 0;
};

}  // namespace gradc::passes
