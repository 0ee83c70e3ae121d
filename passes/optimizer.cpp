#include "passes/optimizer.h"

#include "passes/build_node.h"
#include <cmath>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gradc::passes {

namespace {

constexpr std::string_view kSpecName = "optimizer";

Status validate(const OptimizerOptions& o) {
  auto bad = [](std::string what) { return Error{"optimizer: " + std::move(what)}; };
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(o.lr) || o.lr < 0) return bad("lr must be >= 0, got " + std::to_string(o.lr));
  double minLr = o.resolvedMinLr();
  if (!finite(minLr) || minLr > o.lr)
    return bad("min_lr must be in [0, lr = " + std::to_string(o.lr) + "], got " + std::to_string(minLr));
  if (!finite(o.resolvedWeightDecay())) return bad("weight_decay must be finite");
  if (o.kind == OptimizerOptions::Kind::Sgd && (!finite(o.momentum) || o.momentum < 0))
    return bad("momentum must be >= 0, got " + std::to_string(o.momentum));
  if (o.kind == OptimizerOptions::Kind::AdamW) {
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
      return bad("beta1 and beta2 must be in [0, 1), got " + std::to_string(o.beta1) + " and " +
                 std::to_string(o.beta2));
    if (!finite(o.eps) || o.eps < 0) return bad("eps must be >= 0, got " + std::to_string(o.eps));
  }
  if (!finite(o.clipNorm) || o.clipNorm < 0)
    return bad("the clipping norm must be >= 0 (0 = off), got " + std::to_string(o.clipNorm));
  if (o.totalSteps < 1 || o.warmupSteps < 0 || o.warmupSteps > o.totalSteps)
    return bad("need 0 <= warmup_steps <= total_steps and total_steps >= 1, got warmup_steps = " +
               std::to_string(o.warmupSteps) + ", total_steps = " + std::to_string(o.totalSteps));
  return {};
}

Expected<ir::Node*> emit(ir::Graph& graph, std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs) {
  return buildNode(graph, "optimizer", op, std::move(operands), std::move(attrs), ir::Phase::opt, std::string(kSpecName));
}

}  // namespace

Expected<bool> OptimizerPass::run(ir::Graph& graph) {
  const OptimizerOptions& o = options_;
  if (Status s = validate(o); !s) return s.error();

  // Preconditions.
  for (const auto& n : graph.nodes())
    if (n->phase() == ir::Phase::opt) return Error{"optimizer: the graph already has optimizer nodes; it runs once"};
  if (graph.findNamed("step")) return Error{"optimizer: the graph already has an input or parameter named 'step'"};
  for (std::string_view out : {"lr", "grad_norm"})
    if (graph.findOutput(out)) return Error{"optimizer: the graph already has an output '" + std::string(out) + "'"};
  std::vector<ir::Value*> params;
  for (const auto& p : graph.params())
    if (ir::isLearned(*p)) params.push_back(p.get());
  if (params.empty()) return Error{"optimizer: the graph has no parameters to update"};
  // Names are built in one reused buffer: a lookup per parameter must not allocate.
  std::string key;
  auto named = [&key](std::string_view prefix, const std::string& name) -> const std::string& {
    key.assign(prefix);
    key += name;
    return key;
  };
  std::vector<ir::Value*> grads;
  for (ir::Value* p : params) {
    ir::Value* g = graph.findOutput(named("grad.", p->name()));
    if (!g)
      return Error{"optimizer: parameter '" + p->name() + "' has no gradient output 'grad." + p->name() +
                   "'; run autodiff before optimizer"};
    if (g->type() != p->type())
      return Error{"optimizer: 'grad." + p->name() + "' is " + ir::toString(g->type()) + " but the parameter is " +
                   ir::toString(p->type())};
    grads.push_back(g);
  }
  const bool sgd = o.kind == OptimizerOptions::Kind::Sgd;
  std::vector<std::string> statePrefixes;
  if (sgd && o.momentum != 0) statePrefixes = {"opt.momentum."};
  if (!sgd) statePrefixes = {"opt.adam_m.", "opt.adam_v."};
  // The names a state tensor could take: those already starting with a state prefix (usually
  // none).
  std::unordered_set<std::string_view> taken;
  for (auto span : {graph.inputs(), graph.params()})
    for (const auto& v : span)
      for (const std::string& prefix : statePrefixes)
        if (v->name().starts_with(prefix)) taken.insert(v->name());
  if (!taken.empty())
    for (ir::Value* p : params)
      for (const std::string& prefix : statePrefixes)
        if (taken.count(named(prefix, p->name())))
          return Error{"optimizer: the optimizer state name '" + key + "' is already taken"};

  graph.setInsertionPoint(nullptr);

  // Step, learning rate, gradient scale.
  ir::Value* step = graph.addInput("step", {ir::DType::i64, {}});
  Expected<ir::Node*> lr = emit(graph, "lr_schedule", {step},
                                {{"lr", o.lr},
                                 {"min_lr", o.resolvedMinLr()},
                                 {"warmup_steps", o.warmupSteps},
                                 {"total_steps", o.totalSteps}});
  if (!lr) return lr.error();
  ir::Value* lrValue = (*lr)->result(0);
  ir::Value* scale = nullptr;
  if (o.clipNorm > 0) {
    Expected<ir::Node*> norm = emit(graph, "global_norm", grads, {});
    if (!norm) return norm.error();
    Expected<ir::Node*> coef = emit(graph, "clip_coef", {(*norm)->result(0)}, {{"max_norm", o.clipNorm}});
    if (!coef) return coef.error();
    graph.setOutput("grad_norm", (*norm)->result(0));
    scale = (*coef)->result(0);
  } else {
    Expected<ir::Node*> one =
        emit(graph, "full", {}, {{"shape", ir::Shape{}}, {"dtype", ir::DType::f32}, {"value", 1.0}});
    if (!one) return one.error();
    scale = (*one)->result(0);
  }
  graph.setOutput("lr", lrValue);

  // One update per parameter. The attributes every update and every state tensor share are
  // built once and copied.
  const double weightDecay = o.resolvedWeightDecay();
  auto attrsWithDecay = [&](double decay) {
    return sgd ? ir::AttrMap{{"momentum", o.momentum}, {"weight_decay", decay}}
               : ir::AttrMap{{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", decay}};
  };
  const ir::AttrMap updateAttrs = attrsWithDecay(weightDecay), noDecayAttrs = attrsWithDecay(0.0);
  const ir::AttrMap stateAttrs{{"init", std::string("zeros")}, {"role", std::string("opt_state")}};
  std::vector<ir::Value*> state;
  for (size_t i = 0; i < params.size(); ++i) {
    ir::Value* p = params[i];
    const bool decays = o.decay == OptimizerOptions::DecayGroups::All || p->type().rank() >= 2;
    const ir::AttrMap& attrs = decays ? updateAttrs : noDecayAttrs;
    state.clear();
    for (const std::string& prefix : statePrefixes) {
      ir::AttrMap attrs = stateAttrs;
      attrs.emplace("of", p->name());
      state.push_back(graph.addParam(named(prefix, p->name()), p->type(), std::move(attrs)));
    }
    Expected<ir::Node*> update =
        sgd ? emit(graph, "sgd_step",
                   state.empty() ? std::vector<ir::Value*>{p, grads[i], lrValue, scale}
                                 : std::vector<ir::Value*>{p, grads[i], lrValue, scale, state[0]},
                   attrs)
            : emit(graph, "adamw_step", {p, grads[i], state[0], state[1], lrValue, step, scale}, attrs);
    if (!update) return update.error();
  }

  // The gradients now feed the updates; they are no longer graph outputs.
  std::unordered_set<std::string_view> learned;
  learned.reserve(params.size());
  for (ir::Value* p : params) learned.insert(p->name());
  graph.removeOutputsIf([&](const ir::GraphOutput& o) {
    return o.name.starts_with("grad.") && learned.count(std::string_view(o.name).substr(5)) > 0;
  });
  return true;
}

}  // namespace gradc::passes
