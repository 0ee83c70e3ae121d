// State shared by everything that lowers one spec into an ir::Graph: the graph, the
// diagnostics, the dims, the bounds, and bookkeeping that spans layers (parameter owners for
// duplicate detection, dropout RNG ids, each layer's output for the unused-result warning).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frontend/diag_sink.h"
#include "frontend/dim_expr.h"
#include "frontend/spec.h"
#include "ir/graph.h"

namespace gradc::frontend {

// One lowered layer instance (a layer inside a repeat has one per iteration).
struct LayerOutput {
  ir::Value* value;
  SourcePos pos;
  std::string specName;
  std::string_view op;
};

struct LoweringState {
  ir::Graph& graph;
  DiagSink& diags;
  const DimTable& dims;
  const SpecOptions& options;
  ir::DType dtype;  // of parameters and float activations

  std::int64_t nextRng = 0;          // dropout nodes are keyed 0, 1, 2, ... in lowering order
  std::int64_t layerInstances = 0;   // bounded by options.maxGraphNodes, like the nodes themselves
  std::unordered_map<std::string, SourcePos> paramOwners;  // parameter name -> the layer that made it
  std::vector<LayerOutput> outputs;
};

// Creates one IR node, or reports why it does not fit at `pos` and returns nullptr.
// `context` names the spec construct in the message ("layer 'fc1' (linear)", "the loss"),
// `specOp` is its spec op (so an IR message about the same op is not prefixed twice), and
// `inputNames` name the operands in the hint.
ir::Node* emitNode(LoweringState& state, SourcePos pos, std::string_view context, std::string_view specOp,
                   std::string_view irOp, std::span<ir::Value* const> operands, ir::AttrMap attrs,
                   std::string specName);

// Parameter initialisers (PyTorch defaults), stored as parameter attributes.
ir::AttrMap uniformInit(double bound);
ir::AttrMap normalInit(double stddev);
ir::AttrMap onesInit();
ir::AttrMap zerosInit();

}  // namespace gradc::frontend
