#include "runtime/collective_context.h"

#include <cstdio>

namespace gradc::runtime {

void CollectiveContext::started(const ir::Node* start, std::unique_ptr<PendingCollective> pending) {
  pending_[start] = std::move(pending);
}

Status CollectiveContext::wait(const ir::Node* start) {
  auto it = pending_.find(start);
  if (it == pending_.end()) return Error{"internal: waiting for a collective that was never started"};
  std::unique_ptr<PendingCollective> pending = std::move(it->second);
  pending_.erase(it);
  return blocking([&] { return pending->wait(); });
}

std::string CollectiveContext::describe(const ir::Node& node, std::int64_t step) {
  std::string what;
  const ir::Collective role = node.op().collective;
  if (role == ir::Collective::AllReduceStart || role == ir::Collective::AllReduceWait) {
    const std::int64_t bucket = ir::getInt(node.attrs(), "bucket").value_or(-1);
    const ir::Node& start = role == ir::Collective::AllReduceStart ? node : *node.operand(0)->producer();
    const double mib = static_cast<double>(start.result(0)->type().bytes()) / (1 << 20);
    char buf[128];
    std::snprintf(buf, sizeof buf, "all_reduce of gradient bucket %lld (%zu tensor%s, %.2f MiB)",
                  static_cast<long long>(bucket), start.numOperands(), start.numOperands() == 1 ? "" : "s", mib);
    what = bucket < 0 ? "all_reduce of the loss" : buf;
  } else {
    // What travels: the operands, or for a receive (scatter_recv) the result.
    std::string types;
    if (role == ir::Collective::ScatterRecv)
      types = ir::toString(node.result(0)->type());
    else
      for (const ir::Value* v : node.operands()) types += (types.empty() ? "" : ", ") + ir::toString(v->type());
    what = std::string(node.opName()) + " of " + types;
  }
  return what + " at step " + std::to_string(step);
}

}  // namespace gradc::runtime
