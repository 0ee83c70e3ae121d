#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"

namespace gradc::ir {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), names_(g) {}

  Status run() {
    std::unordered_set<std::string> declared;
    for (auto span : {g_.inputs(), g_.params()})
      for (const auto& v : span) {
        if (v->name().empty()) return Error{"an input or parameter has no name"};
        if (!declared.insert(v->name()).second) return Error{"'%" + v->name() + "' is declared twice"};
        if (!checkedNumel(v->type().shape))
          return Error{"'%" + v->name() + "' has an invalid shape " + shapeToString(v->type().shape)};
        if (Status s = checkUses(v.get()); !s) return s;
        defined_.insert(v.get());
      }
    for (const auto& node : g_.nodes()) {
      if (Status s = checkNode(*node); !s) return Error{"at '" + printNode(*node, names_) + "': " + s.message()};
      for (size_t i = 0; i < node->numResults(); ++i) defined_.insert(node->result(i));
    }
    std::unordered_set<std::string> outputNames;
    std::unordered_map<const Value*, int> outputRefs;
    for (const GraphOutput& out : g_.outputs()) {
      if (!outputNames.insert(out.name).second) return Error{"output '" + out.name + "' is declared twice"};
      if (!defined_.count(out.value)) return Error{"output '" + out.name + "' refers to a value not in the graph"};
      ++outputRefs[out.value];
    }
    for (const Value* v : defined_) {
      if (v->isGraphOutput() != (outputRefs.count(v) > 0))
        return Error{"output bookkeeping of " + names_(v) + " is out of sync"};
      // Every recorded use is a distinct operand slot holding v (checkUses); as many as there
      // are such slots means each slot is recorded exactly once.
      auto slots = operandSlots_.find(v);
      const size_t expected = slots == operandSlots_.end() ? 0 : slots->second;
      if (v->uses().size() != expected)
        return Error{"the use list of " + names_(v) + " records " + std::to_string(v->uses().size()) +
                     " uses, but " + std::to_string(expected) + " operand slots hold it"};
    }
    return {};
  }

 private:
  Status checkNode(const Node& node) {
    for (size_t i = 0; i < node.operands().size(); ++i) {
      const Value* v = node.operand(i);
      if (!defined_.count(v)) {
        bool later = std::any_of(g_.nodes().begin(), g_.nodes().end(), [&](const auto& n) {
          for (size_t r = 0; r < n->numResults(); ++r)
            if (n->result(r) == v) return true;
          return false;
        });
        return Error{"operand " + std::to_string(i) + " (" + names_(v) + ") is " +
                     (later ? "used before it is defined" : "not defined in this graph")};
      }
      ++operandSlots_[v];
    }
    auto operandTypes = node.operandTypes();
    Expected<std::vector<TensorType>> inferred = inferResultTypes(node.op(), operandTypes, node.attrs());
    if (!inferred) return Error{inferred.error().message};
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
        return Error{"the use list of " + names_(v) + " records a use that is not an operand"};
    }
    std::vector<Use> sorted(v->uses().begin(), v->uses().end());
    std::sort(sorted.begin(), sorted.end(), [](const Use& a, const Use& b) {
      return std::less<const Node*>{}(a.user, b.user) || (a.user == b.user && a.operandIndex < b.operandIndex);
    });
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return Error{"the use list of " + names_(v) + " records a use twice"};
    return {};
  }

  const Graph& g_;
  ValueNames names_;
  std::unordered_set<const Value*> defined_;
  std::unordered_map<const Value*, size_t> operandSlots_;  // operand slots holding each value
};

}  // namespace

Status verify(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace gradc::ir
