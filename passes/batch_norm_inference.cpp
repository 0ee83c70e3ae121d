#include "passes/batch_norm_inference.h"

#include "passes/build_node.h"
#include <vector>

namespace gradc::passes {

Expected<bool> BatchNormInference::run(ir::Graph& graph) {
  std::vector<ir::Node*> updates;
  for (const auto& node : graph.nodes())
    if (node->op().role == ir::OpRole::RunningStatsUpdate) updates.push_back(node.get());
  for (ir::Node* update : updates) {
    ir::Node* norm = update->operand(3)->producer();
    if (!norm || !norm->op().batchStatistics)
      return Error{"batch-norm-inference: a running_stats_update does not read a batch_norm's statistics"};
    Expected<ir::Node*> eval =
        buildNode(graph, "batch-norm-inference", "batch_norm_inference",
                  {norm->operand(0), norm->operand(1), norm->operand(2), update->operand(0), update->operand(1)},
                  {{"eps", *ir::getFloat(norm->attrs(), "eps")}}, norm->phase(), norm->specName(), norm);
    if (!eval) return eval.error();
    graph.replaceAllUsesWith(norm->result(0), (*eval)->result(0));
    graph.erase(update);
    for (size_t r = 0; r < norm->numResults(); ++r)
      if (norm->result(r)->hasUses())
        return Error{"batch-norm-inference: batch_norm's statistics have users besides its running statistics"};
    graph.erase(norm);
  }
  return !updates.empty();
}

}  // namespace gradc::passes
