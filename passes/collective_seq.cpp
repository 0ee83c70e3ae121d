#include "passes/collective_seq.h"

#include <unordered_map>

namespace gradc::passes {

std::vector<std::pair<ir::Node*, std::int64_t>> renumberCollectives(ir::Graph& g) {
  std::vector<std::pair<ir::Node*, std::int64_t>> changed;
  std::unordered_map<const ir::Node*, std::int64_t> seqOf;
  auto set = [&](ir::Node& n, std::int64_t seq) {
    const std::int64_t old = ir::getInt(n.attrs(), "seq").value_or(-1);
    if (old == seq) return;
    changed.emplace_back(&n, old);
    n.attrs()["seq"] = seq;
  };
  std::int64_t next = 0;
  for (const auto& n : g.nodes()) {
    const ir::Collective c = n->op().collective;
    if (n->op().issuesCollective) {
      seqOf[n.get()] = next;
      set(*n, next++);
    } else if (c == ir::Collective::AllReduceWait || c == ir::Collective::ReduceScatterWait ||
               c == ir::Collective::AllGatherWait) {
      set(*n, seqOf.at(n->operand(0)->producer()));
    }
  }
  return changed;
}

}  // namespace gradc::passes
