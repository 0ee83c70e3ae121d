#include "ir/graph.h"
#include "ir/kernel_target.h"

#include <algorithm>
#include <cassert>
#include <unordered_map>
#include <utility>

namespace gradc::ir {

bool Value::isBatchedInput() const {
  return kind_ == ValueKind::Input && getBool(attrs_, "batched").value_or(true);
}

std::string_view phaseName(Phase phase) {
  switch (phase) {
    case Phase::fwd: return "fwd";
    case Phase::bwd: return "bwd";
    case Phase::opt: return "opt";
    case Phase::recompute: return "recompute";
    case Phase::comm: return "comm";
  }
  return "?";
}

std::optional<Phase> parsePhase(std::string_view name) {
  for (Phase p : {Phase::fwd, Phase::bwd, Phase::opt, Phase::recompute, Phase::comm})
    if (phaseName(p) == name) return p;
  return std::nullopt;
}

// ---- Node ------------------------------------------------------------------------------------

Node::~Node() { dropOperandUses(); }

// Use lists grow in creation order and nodes usually go newest first (erasure of recompute
// clones, rewrites undone), so the use is searched for from the back: O(1) in that case even
// for a value with thousands of users (the learning rate, a shared scalar).
void Node::dropOperandUses() {
  for (unsigned i = 0; i < operands_.size(); ++i) {
    auto& uses = operands_[i]->uses_;
    auto it = std::find(uses.rbegin(), uses.rend(), Use{this, i});
    assert(it != uses.rend() && "use list out of sync");
    if (it != uses.rend()) uses.erase(std::next(it).base());
  }
  operands_.clear();
}

void Node::setOperand(size_t i, Value* value) {
  Value* old = operands_.at(i);
  auto it = std::find(old->uses_.rbegin(), old->uses_.rend(), Use{this, static_cast<unsigned>(i)});
  assert(it != old->uses_.rend());
  old->uses_.erase(std::next(it).base());
  operands_[i] = value;
  value->uses_.push_back(Use{this, static_cast<unsigned>(i)});
}

std::vector<TensorType> Node::operandTypes() const {
  std::vector<TensorType> types;
  types.reserve(operands_.size());
  for (Value* v : operands_) types.push_back(v->type());
  return types;
}

std::vector<TensorType> Node::resultTypes() const {
  std::vector<TensorType> types;
  types.reserve(results_.size());
  for (const auto& v : results_) types.push_back(v->type());
  return types;
}

std::int64_t Node::flops() const {
  if (!op_->flops) return 0;  // (no operand and result copies for ops without a cost)
  auto ins = operandTypes();
  auto outs = resultTypes();
  return opFlops(*op_, ins, attrs_, outs);
}

std::int64_t Node::workspaceBytes(KernelSetting kernels) const {
  const CostFn rule = workspaceRuleFor(*op_, kernels);
  if (!rule) return 0;  // (no operand and result copies)
  auto ins = operandTypes();
  auto outs = resultTypes();
  return rule(OpContext{ins, attrs_, std::max(kernels.threads, 1)}, outs);
}

// ---- Graph -----------------------------------------------------------------------------------

int Graph::kernelThreads() const { return static_cast<int>(std::max<std::int64_t>(getInt(attrs_, "kernel_threads").value_or(1), 1)); }

void Graph::setKernelThreads(int threads) { attrs_["kernel_threads"] = std::int64_t{std::max(threads, 1)}; }

const KernelTarget& Graph::kernelTarget() const {
  const std::optional<std::string> name = getString(attrs_, "kernel_target");
  const KernelTarget* named = name ? findKernelTarget(*name) : nullptr;
  return named ? *named : defaultKernelTarget();
}

void Graph::setKernelTarget(const KernelTarget& target) {
  if (&target == &defaultKernelTarget())
    attrs_.erase("kernel_target");
  else
    attrs_["kernel_target"] = std::string(target.name());
}

Graph::~Graph() { releaseNodes(); }

// Every value of the graph goes at once, so use lists are cleared wholesale rather than use by
// use (linear, and independent of the order: reorder() may have put a user before its producer
// in a graph that then failed verification).
void Graph::releaseNodes() {
  for (auto& v : inputs_) v->uses_.clear();
  for (auto& v : params_) v->uses_.clear();
  for (auto& n : nodes_) {
    n->operands_.clear();
    for (auto& r : n->results_) r->uses_.clear();
  }
  nodes_.clear();
}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  // Nodes hold uses of values owned by inputs_/params_: release them before those go.
  releaseNodes();
  name_ = std::move(other.name_);
  attrs_ = std::move(other.attrs_);
  inputs_ = std::move(other.inputs_);
  params_ = std::move(other.params_);
  nodes_ = std::move(other.nodes_);
  outputs_ = std::move(other.outputs_);
  outputIndex_ = std::move(other.outputIndex_);
  insertBefore_ = std::exchange(other.insertBefore_, nullptr);
  nextValueId_ = std::exchange(other.nextValueId_, 0);
  nextNodeId_ = std::exchange(other.nextNodeId_, 0);
  return *this;
}

Value* Graph::addInput(std::string name, TensorType type) {
  inputs_.push_back(std::unique_ptr<Value>(new Value(ValueKind::Input, std::move(type), std::move(name), nullptr, 0)));
  inputs_.back()->id_ = nextValueId_++;
  return inputs_.back().get();
}

Value* Graph::addParam(std::string name, TensorType type, AttrMap attrs) {
  params_.push_back(std::unique_ptr<Value>(new Value(ValueKind::Param, std::move(type), std::move(name), nullptr, 0)));
  params_.back()->id_ = nextValueId_++;
  params_.back()->attrs_ = std::move(attrs);
  return params_.back().get();
}

Value* Graph::findNamed(std::string_view name) const {
  for (const auto& v : inputs_)
    if (v->name() == name) return v.get();
  for (const auto& v : params_)
    if (v->name() == name) return v.get();
  return nullptr;
}

Expected<Node*> Graph::create(const OpInfo& op, std::span<Value* const> operands, AttrMap attrs, Phase phase,
                              std::string specName) {
  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (Value* v : operands) types.push_back(v->type());
  Expected<std::vector<TensorType>> results = inferResultTypes(op, types, attrs);
  if (!results) return results.error();
  return createUnchecked(op, operands, std::move(attrs), std::move(results.value()), phase, std::move(specName));
}

Expected<Node*> Graph::create(std::string_view opName, std::span<Value* const> operands, AttrMap attrs, Phase phase,
                              std::string specName) {
  const OpInfo* op = findOp(opName);
  if (!op) return Error{"unknown op '" + std::string(opName) + "'"};
  return create(*op, operands, std::move(attrs), phase, std::move(specName));
}

Node* Graph::createUnchecked(const OpInfo& op, std::span<Value* const> operands, AttrMap attrs,
                             std::vector<TensorType> resultTypes, Phase phase, std::string specName) {
  auto node = std::unique_ptr<Node>(new Node(&op, std::move(attrs), phase, std::move(specName)));
  node->operands_.reserve(operands.size());  // one allocation each, sized exactly
  node->results_.reserve(resultTypes.size());
  for (Value* v : operands) {
    v->uses_.push_back(Use{node.get(), static_cast<unsigned>(node->operands_.size())});
    node->operands_.push_back(v);
  }
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    node->results_.push_back(std::unique_ptr<Value>(
        new Value(ValueKind::Result, std::move(resultTypes[i]), {}, node.get(), static_cast<unsigned>(i))));
    node->results_.back()->id_ = nextValueId_++;
  }
  node->id_ = nextNodeId_++;
  Node* raw = node.get();
  if (insertBefore_) {
    auto pos = std::find_if(nodes_.begin(), nodes_.end(), [&](auto& n) { return n.get() == insertBefore_; });
    assert(pos != nodes_.end() && "insertion point not in graph");
    nodes_.insert(pos, std::move(node));
  } else {
    nodes_.push_back(std::move(node));
  }
  return raw;
}

std::optional<size_t> Graph::indexOf(const Node* node) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == node) return i;
  return std::nullopt;
}

void Graph::erase(Node* node) {
  std::optional<size_t> index = indexOf(node);
  assert(index && "erasing a node of another graph");
  if (index) eraseNodeAt(*index);
}

void Graph::eraseNodeAt(size_t index) {
  Node* node = nodes_[index].get();
  for (const auto& r : node->results_) {
    (void)r;
    assert(!r->hasUses() && "erasing a node whose results are still used");
  }
  if (insertBefore_ == node) insertBefore_ = nullptr;
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(index));
}

void Graph::shrinkIds() {
  std::uint32_t values = 0, nodes = 0;
  for (const auto& v : inputs_) values = std::max(values, v->id_ + 1);
  for (const auto& v : params_) values = std::max(values, v->id_ + 1);
  for (const auto& n : nodes_) {
    nodes = std::max(nodes, n->id_ + 1);
    for (const auto& r : n->results_) values = std::max(values, r->id_ + 1);
  }
  nextValueId_ = values;
  nextNodeId_ = nodes;
}

void Graph::reorder(const std::vector<Node*>& order) {
  assert(order.size() == nodes_.size());
  std::vector<size_t> position(nextNodeId_, nodes_.size());  // node id -> index in nodes_
  for (size_t i = 0; i < nodes_.size(); ++i) position[nodes_[i]->id_] = i;
  std::vector<std::unique_ptr<Node>> reordered;
  reordered.reserve(order.size());
  for (Node* n : order) {
    const size_t at = n->id_ < position.size() ? position[n->id_] : nodes_.size();
    assert(at < nodes_.size() && nodes_[at].get() == n && "order is not a permutation of the nodes");
    reordered.push_back(std::move(nodes_[at]));
  }
  nodes_ = std::move(reordered);
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  assert(from != to);
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.user->setOperand(u.operandIndex, to);
  if (from->graphOutputRefs_ == 0) return;
  for (auto& out : outputs_)
    if (out.value == from) {
      out.value = to;
      --from->graphOutputRefs_;
      ++to->graphOutputRefs_;
    }
}

void Graph::setOutput(std::string name, Value* value) {
  if (auto it = outputIndex_.find(name); it != outputIndex_.end()) {
    GraphOutput& out = outputs_[it->second];
    --out.value->graphOutputRefs_;
    out.value = value;
    ++value->graphOutputRefs_;
    return;
  }
  outputIndex_.emplace(name, outputs_.size());
  outputs_.push_back(GraphOutput{std::move(name), value});
  ++value->graphOutputRefs_;
}

bool Graph::removeOutput(std::string_view name) {
  return removeOutputsIf([&](const GraphOutput& o) { return o.name == name; }) > 0;
}

void Graph::reindexOutputs() {
  outputIndex_.clear();
  outputIndex_.reserve(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) outputIndex_.emplace(outputs_[i].name, i);
}

Value* Graph::findOutput(std::string_view name) const {
  auto it = outputIndex_.find(name);
  return it == outputIndex_.end() ? nullptr : outputs_[it->second].value;
}

bool isLearned(const Value& param) {
  if (param.kind() != ValueKind::Param) return false;
  const std::optional<std::string> role = getString(param.attrs(), "role");
  return !role || (*role != "opt_state" && *role != "running_stat");
}

}  // namespace gradc::ir

namespace gradc::ir {

std::vector<Value*> optimizerStateOperands(const Node& update) {
  std::vector<Value*> state;
  const OpInfo& op = update.op();
  for (int i = op.stateBegin; i < op.stateEnd && static_cast<size_t>(i) < update.numOperands(); ++i)
    state.push_back(update.operand(static_cast<size_t>(i)));
  return state;
}

}  // namespace gradc::ir
