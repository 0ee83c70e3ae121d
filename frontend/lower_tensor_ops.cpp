// Lowering of the parameter-free layers: elementwise ops, matmul, activations, softmax,
// dropout and shape ops. Most map one-to-one onto the IR op of the same name; axes are
// checked here (so the error points at the attribute) and passed on normalised.
#include <algorithm>

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

// Normalises an axis attribute against the rank, or reports it.
std::optional<std::int64_t> axis(Layer& layer, std::string_view attr, std::int64_t value, int rank) {
  std::optional<int> a = ir::normalizeAxis(value, rank);
  if (!a) {
    layer.error(layer.attrPos(attr), layer.describe() + ": " + std::string(attr) + " " + std::to_string(value) +
                                         " is out of range for its input " + ir::toString(layer.input()->type()),
                "axes of a rank-" + std::to_string(rank) + " tensor are " + std::to_string(-rank) + " .. " +
                    std::to_string(rank - 1));
    return std::nullopt;
  }
  return *a;
}

}  // namespace

ir::Value* lowerSameOp(Layer& layer) {
  std::vector<ir::Value*> operands;
  for (const LayerInput& in : layer.inputs) operands.push_back(in.value);
  return layer.emit1(layer.op().name, std::move(operands));
}

ir::Value* lowerGelu(Layer& layer) {
  ir::AttrMap attrs;
  if (layer.word("approximate") != "none") attrs["approximate"] = layer.word("approximate");
  return layer.emit1("gelu", {layer.input()}, std::move(attrs));
}

ir::Value* lowerScale(Layer& layer) { return layer.emit1("scale", {layer.input()}, {{"factor", layer.real("by")}}); }

ir::Value* lowerSoftmax(Layer& layer) {
  std::optional<std::int64_t> dim = axis(layer, "dim", layer.integer("dim"), layer.input()->type().rank());
  if (!dim) return nullptr;
  return layer.emit1(layer.op().name, {layer.input()}, {{"dim", *dim}});
}

ir::Value* lowerDropout(Layer& layer) {
  double p = layer.real("p");
  if (!(p >= 0.0 && p < 1.0))
    return layer.error(layer.attrPos("p"), "p of " + layer.describe() + " must be in [0, 1), got " +
                                               std::to_string(p));
  if (p == 0.0) return layer.input();  // dropping nothing is the identity: no node
  return layer.dropout(layer.input(), p);
}

ir::Value* lowerReshape(Layer& layer) {
  const std::vector<std::int64_t>& requested = layer.intList("shape");
  SourcePos where = layer.attrPos("shape");
  const ir::TensorType& in = layer.input()->type();
  ir::Shape shape = requested;
  int inferred = -1;
  std::int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0)
        return layer.error(where, layer.describe() + ": at most one extent of 'shape' may be -1");
      inferred = static_cast<int>(i);
      continue;
    }
    if (shape[i] <= 0)
      return layer.error(where, layer.describe() + ": extent " + std::to_string(shape[i]) +
                                    " of 'shape' must be positive (or -1 to infer it)");
    if (__builtin_mul_overflow(known, shape[i], &known) || known > ir::kMaxElements)
      return layer.error(where, layer.describe() + ": tensor of shape " + ir::shapeToString(shape) + " is too large");
  }
  if (inferred >= 0) {
    if (in.numel() % known != 0)
      return layer.error(where, layer.describe() + ": cannot reshape " + ir::toString(in) + " (" +
                                    std::to_string(in.numel()) + " elements) to " + ir::shapeToString(requested) +
                                    ": " + std::to_string(known) + " does not divide " + std::to_string(in.numel()));
    shape[static_cast<size_t>(inferred)] = in.numel() / known;
  } else if (known != in.numel()) {
    return layer.error(where, layer.describe() + ": cannot reshape " + ir::toString(in) + " (" +
                                  std::to_string(in.numel()) + " elements) to " + ir::shapeToString(shape) + " (" +
                                  std::to_string(known) + " elements)");
  }
  return layer.emit1("reshape", {layer.input()}, {{"shape", shape}});
}

ir::Value* lowerTranspose(Layer& layer) {
  const std::vector<std::int64_t>& dims = layer.intList("dims");
  if (dims.size() != 2)
    return layer.error(layer.attrPos("dims"), layer.describe() + ": 'dims' names the two axes to swap, e.g. [1, 2]; "
                                                  "got " + std::to_string(dims.size()) + " entries");
  int rank = layer.input()->type().rank();
  std::optional<std::int64_t> d0 = axis(layer, "dims", dims[0], rank);
  if (!d0) return nullptr;
  std::optional<std::int64_t> d1 = axis(layer, "dims", dims[1], rank);
  if (!d1) return nullptr;
  return layer.emit1("transpose", {layer.input()}, {{"dim0", *d0}, {"dim1", *d1}});
}

// sum / mean over `dims` (every axis when absent), normalised, deduplicated and sorted.
ir::Value* lowerReduction(Layer& layer) {
  const int rank = layer.input()->type().rank();
  std::vector<std::int64_t> dims;
  // No dims, or an empty list: every axis, listed (the IR's empty list would mean the same).
  if (!layer.has("dims") || layer.intList("dims").empty()) {
    for (std::int64_t a = 0; a < rank; ++a) dims.push_back(a);
    return layer.emit1(layer.op().name, {layer.input()}, {{"dims", dims}, {"keepdim", layer.flag("keepdim")}});
  }
  for (std::int64_t d : layer.intList("dims")) {
    std::optional<std::int64_t> a = axis(layer, "dims", d, rank);
    if (!a) return nullptr;
    if (std::find(dims.begin(), dims.end(), *a) != dims.end())
      return layer.error(layer.attrPos("dims"), layer.describe() + ": axis " + std::to_string(d) + " is listed twice");
    dims.push_back(*a);
  }
  std::sort(dims.begin(), dims.end());
  return layer.emit1(layer.op().name, {layer.input()}, {{"dims", dims}, {"keepdim", layer.flag("keepdim")}});
}

ir::Value* lowerConcat(Layer& layer) {
  std::optional<std::int64_t> dim = axis(layer, "dim", layer.integer("dim"), layer.input(0)->type().rank());
  if (!dim) return nullptr;
  std::vector<ir::Value*> parts;
  for (const auto& in : layer.inputs) parts.push_back(in.value);
  return layer.emit1("concat", parts, {{"dim", *dim}});
}

// One of `sections` equal parts along `dim`: a view (the IR split's result `part`).
ir::Value* lowerSplit(Layer& layer) {
  const ir::TensorType& in = layer.input()->type();
  std::optional<std::int64_t> dim = axis(layer, "dim", layer.integer("dim"), in.rank());
  if (!dim) return nullptr;
  const std::int64_t sections = layer.integer("sections"), part = layer.integer("part");
  const std::int64_t extent = in.shape[static_cast<size_t>(*dim)];
  if (extent % sections != 0)
    return layer.error(layer.attrPos("sections"), layer.describe() + ": axis " + std::to_string(*dim) + " of " +
                                                      ir::toString(in) + " does not split into " +
                                                      std::to_string(sections) + " equal parts");
  if (part < 0 || part >= sections)
    return layer.error(layer.attrPos("part"), layer.describe() + ": part " + std::to_string(part) + " is not one of the " +
                                                  std::to_string(sections) + " parts (0 .. " +
                                                  std::to_string(sections - 1) + ")");
  ir::Node* node = layer.emit("split", {layer.input()}, {{"dim", *dim}, {"sections", sections}});
  return node ? node->result(static_cast<size_t>(part)) : nullptr;
}

}  // namespace gradc::frontend
