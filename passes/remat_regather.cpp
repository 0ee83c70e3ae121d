// Gathering the parameters again for recomputed nodes under ZeRO stage 3 (the last step of
// remat::planRewrite; the contract is regatherForRecompute's, passes/remat_strategies.h).
//
// Algorithm, one walk over the plan's clones in creation order:
//   - an operand of a clone that is an original view of a forward all_gather_wait of a bucket
//     gathered again for the backward (not `kept`) is read from
//     a regather of that wait: the one already made at the clone's position, else a new one --
//     clones of the wait's all_gather_start (reading the rank's shard, a parameter) and of the
//     wait, placed right before the clone (the start, with prefetch, right after the previous
//     regather's wait at that position);
//   - then the plan is written again in the new order: the clones renumbered, their operands
//     contiguous in clone order, the rewires pointing at the renumbered clones.
// Within one position clones run in creation order (applyRewrite), so each regather's wait
// precedes its readers and its start precedes its wait. A regather costs no FLOPs: the plan's
// recompute FLOPs do not change; the bytes it gathers are measured as any clone's results.
#include <span>
#include <unordered_map>
#include <vector>

#include "passes/remat_strategies.h"

namespace gradc::passes::remat {

namespace {

// Whether v is a view of a forward all_gather_wait whose bucket is not kept (the bucket is
// gathered again for the backward; attribute `kept`, passes/shard_params.h).
bool gatheredAgainForBackward(const ir::Value* v, std::unordered_map<const ir::Node*, bool>& memo) {
  const ir::Node* wait = v->producer();
  if (!wait || wait->op().collective != ir::Collective::AllGatherWait || wait->phase() != ir::Phase::fwd) return false;
  auto [it, fresh] = memo.try_emplace(wait, false);
  if (fresh) it->second = !ir::getBool(wait->attrs(), "kept").value_or(false);
  return it->second;
}

// Which result of its producer v is.
unsigned resultIndex(const ir::Value* v) {
  const ir::Node* p = v->producer();
  for (size_t r = 0; r < p->numResults(); ++r)
    if (p->result(r) == v) return static_cast<unsigned>(r);
  return 0;
}

// One entry of the new clone order: an old clone, or a regather's start or wait.
struct Item {
  int clone = -1;     // old clone index
  int regather = -1;  // else: this regather's ...
  bool start = false;  // ... start (else its wait)
};

struct Regather {
  const ir::Node* wait;
  size_t before;
};

}  // namespace

void regatherForRecompute(RewritePlan& plan, bool prefetch) {
  const size_t n = plan.clones.size();
  if (n == 0) return;
  std::unordered_map<const ir::Node*, bool> memo;
  auto operandsOf = [&](size_t i) {
    const CloneOp& c = plan.clones[i];
    return std::span<const RewriteSource>(plan.operands).subspan(c.first, c.of->numOperands());
  };
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i)
    for (const RewriteSource& s : operandsOf(i)) any = any || (s.clone < 0 && gatheredAgainForBackward(s.value, memo));
  if (!any) return;

  std::vector<Item> order;
  order.reserve(n + 8);
  std::vector<Regather> regathers;
  std::unordered_map<const ir::Node*, int> current;  // wait -> its regather at the current position
  std::vector<int> regatherOf(plan.operands.size(), -1);  // by operand slot
  size_t position = plan.clones[0].before;
  int lastWaitAt = -1;  // index in `order` of the last regather's wait at `position`
  for (size_t i = 0; i < n; ++i) {
    const CloneOp& c = plan.clones[i];
    if (c.before != position) {
      position = c.before;
      current.clear();
      lastWaitAt = -1;
    }
    for (size_t k = 0; k < c.of->numOperands(); ++k) {
      const RewriteSource& s = plan.operands[c.first + k];
      if (s.clone >= 0 || !gatheredAgainForBackward(s.value, memo)) continue;
      const ir::Node* wait = s.value->producer();
      auto [it, fresh] = current.try_emplace(wait, static_cast<int>(regathers.size()));
      if (fresh) {
        const int r = it->second;
        regathers.push_back(Regather{wait, c.before});
        const Item start{-1, r, true};
        if (prefetch && lastWaitAt >= 0)
          order.insert(order.begin() + lastWaitAt + 1, start);
        else
          order.push_back(start);
        lastWaitAt = static_cast<int>(order.size());
        order.push_back(Item{-1, r, false});
      }
      regatherOf[c.first + k] = it->second;
    }
    order.push_back(Item{static_cast<int>(i), -1, false});
  }

  // The plan again in the new order.
  std::vector<int> newIndex(n, -1);
  std::vector<int> startAt(regathers.size(), -1), waitAt(regathers.size(), -1);
  for (size_t j = 0; j < order.size(); ++j) {
    const Item& item = order[j];
    if (item.clone >= 0) newIndex[static_cast<size_t>(item.clone)] = static_cast<int>(j);
    else (item.start ? startAt : waitAt)[static_cast<size_t>(item.regather)] = static_cast<int>(j);
  }
  RewritePlan out;
  out.clones.reserve(order.size());
  out.operands.reserve(plan.operands.size() + 2 * regathers.size());
  for (const Item& item : order) {
    const auto first = static_cast<std::uint32_t>(out.operands.size());
    if (item.clone >= 0) {
      const CloneOp& c = plan.clones[static_cast<size_t>(item.clone)];
      for (size_t k = 0; k < c.of->numOperands(); ++k) {
        RewriteSource s = plan.operands[c.first + k];
        if (const int r = regatherOf[c.first + k]; r >= 0)
          s = RewriteSource{nullptr, waitAt[static_cast<size_t>(r)], resultIndex(s.value)};
        else if (s.clone >= 0)
          s.clone = newIndex[static_cast<size_t>(s.clone)];
        out.operands.push_back(s);
      }
      out.clones.push_back(CloneOp{c.of, c.before, first, c.node});
      continue;
    }
    const Regather& r = regathers[static_cast<size_t>(item.regather)];
    const ir::Node* start = r.wait->operand(0)->producer();
    const ir::Node* of = item.start ? start : r.wait;
    out.operands.push_back(item.start ? RewriteSource{start->operand(0), -1, 0}
                                      : RewriteSource{nullptr, startAt[static_cast<size_t>(item.regather)], 0});
    out.clones.push_back(CloneOp{of, r.before, first, static_cast<std::uint32_t>(of->id())});
  }
  for (Rewire& w : plan.rewires)
    if (w.to.clone >= 0) w.to.clone = newIndex[static_cast<size_t>(w.to.clone)];
  plan.clones = std::move(out.clones);
  plan.operands = std::move(out.operands);
}

}  // namespace gradc::passes::remat
