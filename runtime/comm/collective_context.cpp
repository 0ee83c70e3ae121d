#include "runtime/comm/collective_context.h"

#include <cstdio>

namespace gradc::runtime {

Expected<Communicator*> CollectiveContext::commFor(const ir::Node& node) {
  const std::string_view group = ir::collectiveGroup(node);
  auto it = groups_.find(group);
  if (it == groups_.end())
    return Error{"the collective " + std::string(node.opName()) + " spans group '" + std::string(group) +
                 "', for which this rank has no communicator"};
  return it->second;
}

void CollectiveContext::started(const ir::Node* start, std::unique_ptr<PendingCollective> pending) {
  pending_[start] = std::move(pending);
}

Status CollectiveContext::wait(const ir::Node* start) {
  auto it = pending_.find(start);
  if (it == pending_.end()) return Error{"internal: waiting for a collective that was never started", ErrorKind::Internal};
  std::unique_ptr<PendingCollective> pending = std::move(it->second);
  pending_.erase(it);
  return blocking([&] { return pending->wait(); });
}

std::string CollectiveContext::describe(const ir::Node& node, std::int64_t step) {
  std::string what;
  const ir::Collective role = node.op().collective;
  const std::int64_t bucket = ir::getInt(node.attrs(), "bucket").value_or(-1);
  auto bucketText = [&](const char* verb, const ir::Node& start, std::int64_t bytes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of gradient bucket %lld (%zu tensor%s, %.2f MiB)", verb,
                  static_cast<long long>(bucket), start.numOperands(), start.numOperands() == 1 ? "" : "s",
                  static_cast<double>(bytes) / (1 << 20));
    return std::string(buf);
  };
  if (role == ir::Collective::AllReduceStart || role == ir::Collective::AllReduceWait) {
    const ir::Node& start = role == ir::Collective::AllReduceStart ? node : *node.operand(0)->producer();
    what = bucket == -1   ? "all_reduce of the loss"
           : bucket == -2 ? "all_reduce of the gradient norm"
                          : bucketText("all_reduce", start, start.result(0)->type().bytes());
  } else if (role == ir::Collective::ReduceScatterStart || role == ir::Collective::ReduceScatterWait) {
    const ir::Node& start = role == ir::Collective::ReduceScatterStart ? node : *node.operand(0)->producer();
    what = bucketText("reduce_scatter", start, start.result(0)->type().bytes());
  } else if (role == ir::Collective::AllGatherParams) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "all_gather of the parameters of bucket %lld (%zu tensor%s, %.2f MiB)",
                  static_cast<long long>(bucket), node.numOperands() - 1, node.numOperands() == 2 ? "" : "s",
                  static_cast<double>(node.operands().back()->type().bytes() *
                                      ir::getInt(node.attrs(), "world").value_or(1)) /
                      (1 << 20));
    what = buf;
  } else if (role == ir::Collective::AllGatherStart || role == ir::Collective::AllGatherWait) {
    const ir::Node& start = role == ir::Collective::AllGatherStart ? node : *node.operand(0)->producer();
    const ir::Node* wait = role == ir::Collective::AllGatherWait ? &node : nullptr;
    char buf[160];
    std::snprintf(buf, sizeof buf, "all_gather of the parameters of bucket %lld (%s%.2f MiB)",
                  static_cast<long long>(bucket),
                  wait ? (std::to_string(wait->numResults()) + (wait->numResults() == 1 ? " tensor, " : " tensors, ")).c_str()
                       : "",
                  static_cast<double>(start.result(0)->type().bytes()) / (1 << 20));
    what = buf;
  } else {
    // What travels: the operands, or for a receive (scatter_recv) the result.
    std::string types;
    if (role == ir::Collective::ScatterRecv)
      types = ir::toString(node.result(0)->type());
    else
      for (const ir::Value* v : node.operands()) types += (types.empty() ? "" : ", ") + ir::toString(v->type());
    what = std::string(node.opName()) + " of " + types;
  }
  // Over a group other than the data-parallel one: which (its ranks are numbered within it).
  if (const std::string_view group = ir::collectiveGroup(node); group != ir::kDataParallelAxis)
    what += " over the " + std::string(group) + " group";
  return what + " at step " + std::to_string(step);
}

}  // namespace gradc::runtime
