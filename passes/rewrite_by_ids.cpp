#include "passes/rewrite_by_ids.h"

#include <string>

namespace gradc::passes::remat {

namespace {

SourceById sourceById(const RewriteSource& s) {
  return SourceById{s.clone >= 0 ? 0u : s.value->id(), s.clone, s.result};
}

class Fnv1a {
 public:
  void add(std::uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (word >> (8 * i)) & 0xff;
      hash_ *= 0x100000001b3ull;
    }
  }
  void add(std::string_view s) {
    add(s.size());
    for (char c : s) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ull;
    }
  }
  void add(const ir::TensorType& t) {
    add(static_cast<std::uint64_t>(t.dtype));
    add(t.shape.size());
    for (std::int64_t d : t.shape) add(static_cast<std::uint64_t>(d));
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

RewriteByIds byIds(const RewritePlan& plan) {
  RewriteByIds out;
  out.recomputeFlops = plan.recomputeFlops;
  out.clones.reserve(plan.clones.size());
  for (const CloneOp& c : plan.clones) out.clones.push_back({c.of->id(), c.before, c.first});
  out.operands.reserve(plan.operands.size());
  for (const RewriteSource& s : plan.operands) out.operands.push_back(sourceById(s));
  out.rewires.reserve(plan.rewires.size());
  for (const Rewire& r : plan.rewires) out.rewires.push_back({r.node->id(), r.operand, sourceById(r.to)});
  return out;
}

Expected<RewritePlan> bindRewrite(const RewriteByIds& plan, const ir::Graph& graph) {
  std::vector<ir::Node*> nodes(graph.nodeIdBound(), nullptr);
  std::vector<const ir::Value*> values(graph.valueIdBound(), nullptr);
  for (const auto& v : graph.inputs()) values[v->id()] = v.get();
  for (const auto& v : graph.params()) values[v->id()] = v.get();
  for (const auto& n : graph.nodes()) {
    nodes[n->id()] = n.get();
    for (size_t r = 0; r < n->numResults(); ++r) values[n->result(r)->id()] = n->result(r);
  }
  auto unbound = [](const std::string& what) {
    return internalError("remat", "the recompute plan does not fit this graph: " + what);
  };
  auto node = [&](std::uint32_t id) { return id < nodes.size() ? nodes[id] : nullptr; };
  auto source = [&](const SourceById& s) -> Expected<RewriteSource> {
    if (s.clone >= 0) return RewriteSource{nullptr, s.clone, s.result};
    if (s.value >= values.size() || !values[s.value]) return unbound("no value " + std::to_string(s.value));
    return RewriteSource{values[s.value], -1, s.result};
  };
  RewritePlan out;
  out.recomputeFlops = plan.recomputeFlops;
  out.operands.reserve(plan.operands.size());
  for (const SourceById& s : plan.operands) {
    Expected<RewriteSource> bound = source(s);
    if (!bound) return bound.error();
    out.operands.push_back(*bound);
  }
  out.clones.reserve(plan.clones.size());
  for (const RewriteByIds::Clone& c : plan.clones) {
    ir::Node* of = node(c.of);
    if (!of) return unbound("no node " + std::to_string(c.of));
    if (c.first + of->numOperands() > out.operands.size())
      return unbound("node " + std::to_string(c.of) + " has more operands than the plan lists");
    out.clones.push_back(CloneOp{of, c.before, c.first, c.of});
  }
  out.rewires.reserve(plan.rewires.size());
  for (const RewireById& r : plan.rewires) {
    ir::Node* n = node(r.node);
    if (!n || r.operand >= n->numOperands()) return unbound("no operand " + std::to_string(r.operand) + " of node " + std::to_string(r.node));
    Expected<RewriteSource> to = source(r.to);
    if (!to) return to.error();
    out.rewires.push_back(Rewire{n, r.operand, *to});
  }
  return out;
}

std::uint64_t structureOf(const ir::Graph& graph) {
  Fnv1a h;
  auto values = [&](std::span<const std::unique_ptr<ir::Value>> vs) {
    h.add(vs.size());
    for (const auto& v : vs) {
      h.add(v->id());
      h.add(v->type());
    }
  };
  values(graph.inputs());
  values(graph.params());
  h.add(graph.numNodes());
  for (const auto& n : graph.nodes()) {
    h.add(n->id());
    h.add(n->opName());
    h.add(static_cast<std::uint64_t>(n->phase()));
    h.add(n->numOperands());
    for (size_t i = 0; i < n->numOperands(); ++i) h.add(n->operand(i)->id());
    h.add(n->numResults());
    for (size_t r = 0; r < n->numResults(); ++r) {
      h.add(n->result(r)->id());
      h.add(n->result(r)->type());
    }
  }
  h.add(graph.outputs().size());
  for (const ir::GraphOutput& o : graph.outputs()) {
    h.add(o.name);
    h.add(o.value->id());
  }
  return h.value();
}

}  // namespace gradc::passes::remat
