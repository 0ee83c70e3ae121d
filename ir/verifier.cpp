#include "ir/verifier.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/device_mesh.h"
#include "ir/kernel_target.h"
#include "ir/printer.h"

namespace gradc::ir {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), defined_(g.valueIdBound(), nullptr), operandSlots_(g.valueIdBound(), 0) {}

  Status run() {
    if (auto target = g_.attrs().find("kernel_target"); target != g_.attrs().end()) {
      const std::string* name = std::get_if<std::string>(&target->second);
      if (!name || !findKernelTarget(*name))
        return Error{"the graph attribute kernel_target must name a backend this gradc knows (" +
                     kernelTargetNames() + ")"};
    }
    Expected<DeviceMesh> mesh = meshOf(g_);
    if (!mesh) return mesh.error().withContext("the graph attribute mesh: ");
    mesh_ = std::move(*mesh);
    // Names are compared in place: the graph outlives the check.
    std::unordered_set<std::string_view> declared;
    declared.reserve(g_.inputs().size() + g_.params().size());
    for (auto span : {g_.inputs(), g_.params()})
      for (const auto& v : span) {
        if (v->name().empty()) return Error{"an input or parameter has no name"};
        if (!declared.insert(v->name()).second) return Error{"'%" + v->name() + "' is declared twice"};
        if (!checkedNumel(v->type().shape))
          return Error{"'%" + v->name() + "' has an invalid shape " + shapeToString(v->type().shape)};
        if (Status s = checkUses(v.get()); !s) return s;
        define(v.get());
      }
    for (const auto& node : g_.nodes()) {
      if (Status s = checkNode(*node); !s) return s.error().withContext("at '" + printNode(*node, names()) + "': ");
      for (size_t i = 0; i < node->numResults(); ++i) define(node->result(i));
    }
    std::unordered_set<std::string_view> outputNames;
    std::unordered_map<const Value*, int> outputRefs;
    outputNames.reserve(g_.outputs().size());
    outputRefs.reserve(g_.outputs().size());
    for (const GraphOutput& out : g_.outputs()) {
      if (!outputNames.insert(out.name).second) return Error{"output '" + out.name + "' is declared twice"};
      if (!defined(out.value)) return Error{"output '" + out.name + "' refers to a value not in the graph"};
      ++outputRefs[out.value];
    }
    auto checkCounts = [&](const Value* v) -> Status {
      if (v->isGraphOutput() != (outputRefs.count(v) > 0))
        return Error{"output bookkeeping of " + names()(v) + " is out of sync"};
      // Every recorded use is a distinct operand slot holding v (checkUses); as many as there
      // are such slots means each slot is recorded exactly once.
      const size_t expected = operandSlots_[v->id()];
      if (v->uses().size() != expected)
        return Error{"the use list of " + names()(v) + " records " + std::to_string(v->uses().size()) +
                     " uses, but " + std::to_string(expected) + " operand slots hold it"};
      return {};
    };
    for (auto span : {g_.inputs(), g_.params()})
      for (const auto& v : span)
        if (Status s = checkCounts(v.get()); !s) return s;
    for (const auto& node : g_.nodes())
      for (size_t i = 0; i < node->numResults(); ++i)
        if (Status s = checkCounts(node->result(i)); !s) return s;
    return {};
  }

 private:
  // A collective spans an axis of the mesh, and its world is that axis' extent.
  Status checkGroup(const Node& node) const {
    const std::string_view group = collectiveGroup(node);
    const std::optional<std::int64_t> extent = mesh_.extent(group);
    if (!extent)
      return Error{"the collective spans group '" + std::string(group) + "', which is no axis of the mesh " +
                   mesh_.toString()};
    if (std::optional<std::int64_t> world = getInt(node.attrs(), "world"); world && *world != *extent)
      return Error{"world " + std::to_string(*world) + " is not the extent of its group '" + std::string(group) +
                   "' in the mesh " + mesh_.toString()};
    return {};
  }

  Status checkNode(const Node& node) {
    if (node.op().collective != Collective::None)
      if (Status s = checkGroup(node); !s) return s;
    for (size_t i = 0; i < node.operands().size(); ++i) {
      const Value* v = node.operand(i);
      if (!defined(v)) {
        bool later = std::any_of(g_.nodes().begin(), g_.nodes().end(), [&](const auto& n) {
          for (size_t r = 0; r < n->numResults(); ++r)
            if (n->result(r) == v) return true;
          return false;
        });
        return Error{"operand " + std::to_string(i) + " (" + names()(v) + ") is " +
                     (later ? "used before it is defined" : "not defined in this graph")};
      }
      ++operandSlots_[v->id()];
    }
    // Copied into one reused array (its shapes keep their storage from node to node).
    operandTypes_.resize(node.numOperands());
    for (size_t i = 0; i < node.numOperands(); ++i) operandTypes_[i] = node.operand(i)->type();
    Expected<std::vector<TensorType>> inferred = inferResultTypes(node.op(), operandTypes_, node.attrs());
    if (!inferred) return inferred.error();
    if (inferred->size() != node.numResults())
      return Error{"has " + std::to_string(node.numResults()) + " result(s), the op defines " +
                   std::to_string(inferred->size())};
    for (size_t i = 0; i < node.numResults(); ++i) {
      const Value* r = node.result(i);
      if (r->type() != (*inferred)[i])
        return Error{"result " + std::to_string(i) + " is typed " + toString(r->type()) + " but " +
                     std::string(node.opName()) + " infers " + toString((*inferred)[i])};
      if (r->producer() != &node || r->resultIndex() != i || r->kind() != ValueKind::Result)
        return Error{"result " + std::to_string(i) + " does not point back to its node"};
      if (Status s = checkUses(r); !s) return s;
    }
    return {};
  }

  // Every recorded use must be a real operand slot holding this value, and recorded once.
  Status checkUses(const Value* v) {
    for (const Use& u : v->uses()) {
      if (!u.user || u.operandIndex >= u.user->operands().size() || u.user->operand(u.operandIndex) != v)
        return Error{"the use list of " + names()(v) + " records a use that is not an operand"};
    }
    const auto& uses = v->uses();
    auto twice = [&] {
      if (uses.size() <= 16) {  // the common case: a few uses, compared pairwise
        for (size_t i = 0; i < uses.size(); ++i)
          for (size_t j = i + 1; j < uses.size(); ++j)
            if (uses[i] == uses[j]) return true;
        return false;
      }
      std::vector<Use> sorted(uses.begin(), uses.end());
      std::sort(sorted.begin(), sorted.end(), [](const Use& a, const Use& b) {
        return std::less<const Node*>{}(a.user, b.user) || (a.user == b.user && a.operandIndex < b.operandIndex);
      });
      return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    };
    if (twice()) return Error{"the use list of " + names()(v) + " records a use twice"};
    return {};
  }

  // Values of this graph seen so far, by id (a value of another graph may share an id, not
  // the pointer).
  bool defined(const Value* v) const { return v->id() < defined_.size() && defined_[v->id()] == v; }
  void define(const Value* v) { defined_[v->id()] = v; }
  // Names for messages, built on the first error only.
  const ValueNames& names() {
    if (!names_) names_.emplace(g_);
    return *names_;
  }

  const Graph& g_;
  DeviceMesh mesh_;
  std::optional<ValueNames> names_;
  std::vector<const Value*> defined_;
  std::vector<size_t> operandSlots_;  // by value id: operand slots holding the value
  std::vector<TensorType> operandTypes_;  // the current node's
};

}  // namespace

Status verify(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace gradc::ir
