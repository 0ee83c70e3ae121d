#include "passes/fuse_attention.h"

#include <optional>
#include <vector>

#include "passes/build_node.h"

namespace gradc::passes {

namespace {

using ir::Node;
using ir::OpRole;
using ir::Value;

// The steps of one match, in program order (the optional ones nullptr when absent).
struct Match {
  Node* transpose = nullptr;
  Node* scoresProduct = nullptr;
  Node* scale = nullptr;
  Node* mask = nullptr;
  Node* softmax = nullptr;
  Node* dropout = nullptr;
  Node* outProduct = nullptr;
  Value* q = nullptr;
  Value* k = nullptr;
  Value* v = nullptr;
};

bool readOnceInside(const Value* v) { return !v->isGraphOutput() && v->uses().size() == 1; }

// The forward node producing v with that role, when v is read only by the next step.
Node* producerWithRole(const Value* v, OpRole role) {
  Node* p = v->producer();
  if (!p || p->op().role != role || p->phase() != ir::Phase::fwd || !readOnceInside(v)) return nullptr;
  return p;
}

// The only (forward) reader of v.
Node* onlyReader(const Value* v) {
  if (!readOnceInside(v)) return nullptr;
  Node* u = v->uses()[0].user;
  return u->phase() == ir::Phase::fwd ? u : nullptr;
}

std::int64_t normalisedAxis(std::int64_t axis, std::int64_t rank) { return axis < 0 ? axis + rank : axis; }

ir::Shape leadingOf(const ir::TensorType& t) { return ir::Shape(t.shape.begin(), t.shape.end() - 2); }

// Operand shapes the attention op accepts (ir/ops_attention.cpp), with q not broadcast.
bool shapesFit(const Match& m, const ir::TensorType& scores) {
  const ir::TensorType &q = m.q->type(), &k = m.k->type(), &v = m.v->type();
  const int r = scores.rank();
  if (q.rank() != r || k.rank() != r || v.rank() != r) return false;
  if (q.dtype != scores.dtype || k.dtype != q.dtype || v.dtype != q.dtype) return false;
  if (leadingOf(q) != leadingOf(scores) || leadingOf(k) != leadingOf(v)) return false;
  for (int d = 0; d < r - 2; ++d)
    if (k.shape[d] != q.shape[d] && k.shape[d] != 1) return false;
  return k.shape[r - 1] == q.shape[r - 1] && v.shape[r - 2] == k.shape[r - 2];
}

std::optional<Match> matchAt(Node& softmax) {
  if (softmax.op().role != OpRole::Softmax || softmax.phase() != ir::Phase::fwd) return std::nullopt;
  const ir::TensorType& scores = softmax.result(0)->type();
  const std::int64_t r = scores.rank();
  if (r < 2 || (scores.dtype != ir::DType::f32 && scores.dtype != ir::DType::f64)) return std::nullopt;
  if (normalisedAxis(ir::getInt(softmax.attrs(), "dim").value_or(-1), r) != r - 1) return std::nullopt;
  Match m;
  m.softmax = &softmax;
  Value* in = softmax.operand(0);
  if (Node* mask = producerWithRole(in, OpRole::CausalMask)) {
    m.mask = mask;
    in = mask->operand(0);
  }
  m.scale = producerWithRole(in, OpRole::ConstantScale);
  if (!m.scale) return std::nullopt;
  m.scoresProduct = producerWithRole(m.scale->operand(0), OpRole::MatrixProduct);
  if (!m.scoresProduct) return std::nullopt;
  m.transpose = m.scoresProduct->operand(1)->producer();
  if (!m.transpose || m.transpose->op().viewLayout != ir::ViewLayout::Transpose) return std::nullopt;
  const std::int64_t a = normalisedAxis(ir::getInt(m.transpose->attrs(), "dim0").value_or(0), r);
  const std::int64_t b = normalisedAxis(ir::getInt(m.transpose->attrs(), "dim1").value_or(0), r);
  if (std::min(a, b) != r - 2 || std::max(a, b) != r - 1) return std::nullopt;
  m.q = m.scoresProduct->operand(0);
  m.k = m.transpose->operand(0);

  Value* probs = softmax.result(0);
  Node* next = onlyReader(probs);
  if (next && next->op().evalIdentity && next->op().random) {  // dropout on the probabilities
    m.dropout = next;
    probs = next->result(0);
    next = onlyReader(probs);
  }
  if (!next || next->op().role != OpRole::MatrixProduct || next->operand(0) != probs || next->operand(1) == probs)
    return std::nullopt;
  m.outProduct = next;
  m.v = next->operand(1);
  if (!shapesFit(m, scores)) return std::nullopt;
  return m;
}

std::vector<Match> matches(const ir::Graph& forward) {
  std::vector<Match> out;
  for (const auto& node : forward.nodes())
    if (std::optional<Match> m = matchAt(*node)) out.push_back(*m);
  return out;
}

}  // namespace

int countFusableAttention(const ir::Graph& forward) { return static_cast<int>(matches(forward).size()); }

Expected<int> fuseAttention(ir::Graph& forward) {
  const std::vector<Match> found = matches(forward);
  for (const Match& m : found) {
    ir::AttrMap attrs{{"causal", m.mask != nullptr}, {"scale", *ir::getFloat(m.scale->attrs(), "factor")}};
    if (m.dropout) {
      const double p = ir::getFloat(m.dropout->attrs(), "p").value_or(0.0);
      if (p > 0.0) {
        attrs["p"] = p;
        attrs["rng"] = *ir::getInt(m.dropout->attrs(), "rng");
        if (std::optional<std::int64_t> offset = ir::getInt(m.dropout->attrs(), "rng_offset")) attrs["rng_offset"] = *offset;
      }
    }
    Expected<Node*> fused = buildNode(forward, "fuse-attention", "attention", {m.q, m.k, m.v}, std::move(attrs),
                                      ir::Phase::fwd, m.scoresProduct->specName(), m.outProduct);
    if (!fused) return fused.error();
    forward.replaceAllUsesWith(m.outProduct->result(0), (*fused)->result(0));
    for (Node* n : {m.outProduct, m.dropout, m.softmax, m.mask, m.scale, m.scoresProduct})
      if (n) forward.erase(n);
    if (!m.transpose->result(0)->hasUses()) forward.erase(m.transpose);
  }
  return static_cast<int>(found.size());
}

}  // namespace gradc::passes
