#include "passes/fuse_loss.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>

#include "ir/op_table.h"
#include "passes/build_node.h"

namespace gradc::passes {

namespace {

constexpr std::string_view kFused = "linear_cross_entropy";

bool isFusedLoss(const ir::Node& n) { return n.op().role == ir::OpRole::FusedLinearLoss; }

// The linear node whose result is `logits`, when fusing may consume it.
// The linear head of a forward cross_entropy that can be fused, or nullptr with `why` (when
// given) saying what prevents it.
ir::Node* fusableHead(const ir::Node& loss, std::string* why = nullptr) {
  if (loss.op().role != ir::OpRole::ClassificationLoss || loss.phase() != ir::Phase::fwd) return nullptr;
  auto refuse = [&](const std::string& reason) -> ir::Node* {
    if (why) *why = "its cross_entropy (" + std::string(loss.specName()) + ") " + reason;
    return nullptr;
  };
  // The fused kernel counts every row and has one-hot targets.
  if (ir::getInt(loss.attrs(), "ignore_index"))
    return refuse("has ignore_index, which the fused loss does not support yet (it counts every row)");
  if (ir::getFloat(loss.attrs(), "label_smoothing"))
    return refuse("has label_smoothing, which the fused loss does not support yet (its targets are one-hot)");
  ir::Value* logits = loss.operand(0);
  ir::Node* head = logits->producer();
  if (!head || head->op().role != ir::OpRole::LinearLayer || head->phase() != ir::Phase::fwd)
    return refuse("does not read a linear layer's output (the fused loss needs cross_entropy of a linear layer)");
  if (logits->isGraphOutput() || logits->uses().size() != 1)
    return refuse("reads logits that are also used elsewhere, so they must exist whole");
  return head;
}

}  // namespace

Expected<LossChunking> parseLossChunks(std::string_view text) {
  if (text == "auto") return LossChunking{LossChunking::Mode::Auto, 0};
  if (text == "off") return LossChunking{LossChunking::Mode::Off, 0};
  int k = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
  if (ec != std::errc() || end != text.data() + text.size() || k < 1)
    return Error{"--loss-chunks expects a positive number of token chunks, auto or off, got '" + std::string(text) +
                 "'"};
  return LossChunking{LossChunking::Mode::Fixed, k};
}

std::string whyNoFusableLoss(const ir::Graph& forward) {
  std::string why;
  for (const auto& node : forward.nodes())
    if (fusableHead(*node, &why)) return {};
  return why.empty() ? "the graph has no cross_entropy loss (the fused loss needs cross_entropy of a linear layer's "
                       "output)"
                     : why;
}

int countFusableLosses(const ir::Graph& forward) {
  int n = 0;
  for (const auto& node : forward.nodes()) n += fusableHead(*node) != nullptr;
  return n;
}

Expected<int> fuseLinearCrossEntropy(ir::Graph& forward, int chunks) {
  if (chunks < 1) return Error{"fuse-loss: the chunk count must be positive, got " + std::to_string(chunks)};
  std::vector<ir::Node*> losses;
  for (const auto& node : forward.nodes())
    if (fusableHead(*node)) losses.push_back(node.get());
  for (ir::Node* loss : losses) {
    ir::Node* head = fusableHead(*loss);
    std::vector<ir::Value*> operands{head->operand(0), head->operand(1), loss->operand(1)};
    if (head->numOperands() > 2) operands.push_back(head->operand(2));
    Expected<ir::Node*> fused = buildNode(forward, "fuse-loss", kFused, std::move(operands),
                                          {{"chunks", std::int64_t{chunks}}}, ir::Phase::fwd, head->specName(), loss);
    if (!fused) return fused.error();
    forward.replaceAllUsesWith(loss->result(0), (*fused)->result(0));
    forward.erase(loss);
    forward.erase(head);
  }
  return static_cast<int>(losses.size());
}

void setLossChunks(ir::Graph& graph, int chunks) {
  for (const auto& node : graph.nodes())
    if (isFusedLoss(*node) && ir::getInt(node->attrs(), "chunks") != std::int64_t{chunks})
      node->attrs()["chunks"] = std::int64_t{chunks};
}

int lossChunksOf(const ir::Graph& graph) {
  for (const auto& node : graph.nodes())
    if (isFusedLoss(*node))
      if (std::optional<std::int64_t> k = ir::getInt(node->attrs(), "chunks")) return static_cast<int>(*k);
  return 0;
}

std::vector<int> lossChunkCandidates(const ir::Graph& joint) {
  std::int64_t rows = std::numeric_limits<std::int64_t>::max();
  bool any = false;
  for (const auto& node : joint.nodes())
    if (isFusedLoss(*node)) {
      rows = std::min(rows, node->operand(2)->type().numel());
      any = true;
    }
  if (!any) return {};
  std::vector<int> out;
  for (int k = 1; k <= kMaxAutoLossChunks && k <= rows; k *= 2) out.push_back(k);
  return out;
}

Expected<bool> FuseLossPass::run(ir::Graph& graph) {
  Expected<int> fused = fuseLinearCrossEntropy(graph, chunks_);
  if (!fused) return fused.error();
  return *fused > 0;
}

}  // namespace gradc::passes
