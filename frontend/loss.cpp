// Lowering of the loss. The checks on the target come first so that a wrong dtype or shape is
// reported at the target's name, naming both tensors.
//   cross_entropy: logits [..., C] (float), target [...] (i64/i32 class indices) -> mean, []
//                  (ignore_index: rows with that target are left out of the mean)
//   mse:           input and target of the same float type                      -> mean, []
#include "frontend/loss.h"

#include "frontend/spec_values.h"
#include "frontend/suggest.h"

namespace gradc::frontend {

bool lowerLoss(LoweringState& state, const YamlNode& loss, const Scope& scope) {
  DiagSink& diags = state.diags;
  if (!loss.isMap()) {
    diags.error(loss.pos, "'loss' must be a mapping such as {op: cross_entropy, target: targets}, got " +
                              describeNode(loss));
    return false;
  }
  if (!checkKeys(loss, {"op", "input", "target", "ignore_index", "label_smoothing"}, diags, "the loss", "key",
                 "the loss has 'op', 'target' and optionally 'input' (default '_') and, for cross_entropy, "
                 "'ignore_index' and 'label_smoothing'"))
    return false;
  const YamlNode* opNode = loss.get("op");
  if (!opNode) {
    diags.error(loss.pos, "the loss has no 'op'", "op: cross_entropy (classification) or op: mse (regression)");
    return false;
  }
  std::optional<std::string_view> op = readScalar(*opNode, diags, "the loss 'op'");
  if (!op) return false;
  const std::vector<std::string> ops = {"cross_entropy", "mse"};
  if (*op != "cross_entropy" && *op != "mse") {
    std::string hint = didYouMean(*op, ops);
    diags.error(opNode->pos, "unknown loss '" + clip(*op) + "'",
                hint.empty() ? "the losses are 'cross_entropy' and 'mse'" : hint);
    return false;
  }
  const YamlNode* targetNode = loss.get("target");
  if (!targetNode) {
    diags.error(opNode->pos, "the loss has no 'target'", "name the input holding the targets, e.g. target: targets");
    return false;
  }

  ir::Value* input = nullptr;
  std::string inputName = "_";
  SourcePos inputPos = opNode->pos;
  if (const YamlNode* in = loss.get("input")) {
    input = resolveName(scope, *in, diags, "the loss 'input'");
    if (!input) return false;
    inputName = std::string(in->text);
    inputPos = in->pos;
  } else if (!(input = scope.find("_"))) {
    diags.error(opNode->pos, "the loss has no input: there are no layers", "add layers or name one with 'input:'");
    return false;
  }
  ir::Value* target = resolveName(scope, *targetNode, diags, "the loss 'target'");
  if (!target) return false;

  const ir::TensorType& x = input->type();
  const ir::TensorType& t = target->type();
  std::string xs = "'" + inputName + "' " + ir::toString(x);
  std::string ts = "'" + std::string(targetNode->text) + "' " + ir::toString(t);
  if (!ir::isFloating(x.dtype)) {
    diags.error(inputPos, "the loss input must be floating point, but it is " + xs);
    return false;
  }
  if (*op == "cross_entropy") {
    if (x.rank() < 1) {
      diags.error(inputPos, "cross_entropy needs logits with a class dimension [..., classes], got " + xs);
      return false;
    }
    if (!ir::isInteger(t.dtype)) {
      diags.error(targetNode->pos, "cross_entropy needs integer class indices as target, but the target is " + ts,
                  "declare the target input with 'dtype: i64'");
      return false;
    }
    ir::Shape expected(x.shape.begin(), x.shape.end() - 1);
    if (t.shape != expected) {
      diags.error(targetNode->pos, "the target " + ts + " does not fit the logits " + xs + ": it must have shape " +
                                       ir::shapeToString(expected),
                  "the target holds one class index per row of logits (the logits' shape without its last "
                  "dimension)");
      return false;
    }
  } else {
    if (!ir::isFloating(t.dtype)) {
      diags.error(targetNode->pos, "mse needs a floating-point target, but the target is " + ts);
      return false;
    }
    if (t != x) {
      diags.error(targetNode->pos, "mse needs input and target of the same type, but the input is " + xs +
                                       " and the target is " + ts);
      return false;
    }
  }
  ir::AttrMap attrs;
  if (const YamlNode* ignore = loss.get("ignore_index")) {
    // Rows whose target is this class count for nothing (PyTorch's ignore_index; -100 there).
    if (*op != "cross_entropy") {
      diags.error(ignore->pos, "ignore_index is a cross_entropy option; mse has no classes to ignore");
      return false;
    }
    std::optional<std::int64_t> value = readInt(*ignore, state.dims, diags, "the loss 'ignore_index'");
    if (!value) return false;
    attrs["ignore_index"] = *value;
  }
  if (const YamlNode* smoothing = loss.get("label_smoothing")) {
    if (*op != "cross_entropy") {
      diags.error(smoothing->pos, "label_smoothing is a cross_entropy option; mse has no classes");
      return false;
    }
    std::optional<double> eps = readFloat(*smoothing, state.dims, diags, "the loss 'label_smoothing'");
    if (!eps) return false;
    if (!(*eps >= 0 && *eps < 1)) {
      diags.error(smoothing->pos, "the loss 'label_smoothing' must be in [0, 1), got " + std::string(smoothing->text));
      return false;
    }
    if (*eps > 0) attrs["label_smoothing"] = *eps;
  }
  ir::Value* operands[] = {input, target};
  ir::Node* node = emitNode(state, opNode->pos, "the loss", *op, *op, operands, std::move(attrs), "loss");
  if (!node) return false;
  state.graph.setOutput("loss", node->result(0));
  return true;
}

}  // namespace gradc::frontend
