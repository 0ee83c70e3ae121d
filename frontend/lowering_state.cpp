// Node creation with spec-level error messages, and parameter initialiser attributes.
#include "frontend/lowering_state.h"

namespace gradc::frontend {

ir::Node* emitNode(LoweringState& state, SourcePos pos, std::string_view context, std::string_view specOp,
                   std::string_view irOp, std::span<ir::Value* const> operands, ir::AttrMap attrs,
                   std::string specName) {
  if (static_cast<std::int64_t>(state.graph.numNodes()) >= state.options.maxGraphNodes) {
    state.diags.error(pos,
                      "the model lowers to more than " + std::to_string(state.options.maxGraphNodes) + " IR nodes",
                      "reduce a repeat count or the sequence length of an lstm (it is unrolled per time step)");
    return nullptr;
  }
  Expected<ir::Node*> node = state.graph.create(irOp, operands, std::move(attrs), ir::Phase::fwd, std::move(specName));
  if (node) return *node;

  // The op table prefixes its messages with the op name; say which spec construct it was.
  std::string message = node.error().message;
  std::string prefix = std::string(irOp) + ": ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  std::string where(context);
  if (irOp != specOp) where += " (in its " + std::string(irOp) + ")";
  std::string hint = "operand types: ";
  for (size_t i = 0; i < operands.size(); ++i) hint += (i ? ", " : "") + toString(operands[i]->type());
  state.diags.error(pos, where + ": " + message, operands.empty() ? std::string() : hint);
  return nullptr;
}

ir::AttrMap uniformInit(double bound) { return {{"init", std::string("uniform")}, {"bound", bound}}; }
ir::AttrMap normalInit(double stddev) { return {{"init", std::string("normal")}, {"std", stddev}}; }
ir::AttrMap onesInit() { return {{"init", std::string("ones")}}; }
ir::AttrMap zerosInit() { return {{"init", std::string("zeros")}}; }

}  // namespace gradc::frontend
