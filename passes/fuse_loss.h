// Fusing the LM head into the loss: cross_entropy(linear(x, w[, b]), target) becomes one
// linear_cross_entropy(x, w, target[, b]){chunks} node (ir/ops_fused_loss.cpp), so that no step
// ever holds the logits [rows, classes] or their gradient: the kernel computes them a chunk of
// rows at a time, with the loss's gradients for x, w and b (no logits are recomputed; the
// gradient rule scales the gradients by the upstream one).
//
// Pipeline position: on the forward graph (after the data-parallel partition, before micro-
// batching or autodiff).
//
// Match: a forward cross_entropy node whose logits are the result of a forward linear node that
// nothing else reads and that is not a graph output. The gather loss placement (DataParallel's
// baseline) puts a gather between the two: nothing matches there, by design.
//
// Choice (passes/plan/training_planner.h, chooseTrainingPlan): `--loss-chunks auto` fuses only under a
// budget the unfused step does not meet as it is: fusing costs no FLOPs, but at equal recompute
// the selection prefers the unfused step (its LM head runs as one large matrix product), then
// the fewest chunks. The chunk count is a free parameter of a fused graph (setLossChunks changes
// only the fused node's workspace), tried from lossChunkCandidates. `--loss-chunks K` forces K
// chunks; `off` never fuses.
//
// Invariants: the loss and every gradient equal the unfused step's up to float summation order
// (tests/runtime/fused_loss_test.cpp); a graph without a match is left unchanged.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace gradc::passes {

inline constexpr int kMaxAutoLossChunks = 64;

struct LossChunking {
  enum class Mode { Off, Auto, Fixed };
  Mode mode = Mode::Auto;
  int chunks = 0;  // Fixed: the count
};
// "auto", "off" or a positive count; an Error says which forms are accepted.
Expected<LossChunking> parseLossChunks(std::string_view text);

// Forward (linear, cross_entropy) pairs the rewrite would fuse.
// Why no loss of `forward` can be fused ("" when one can), for the message of --loss-chunks K.
std::string whyNoFusableLoss(const ir::Graph& forward);

int countFusableLosses(const ir::Graph& forward);
// Rewrites every pair with `chunks` chunks; returns how many.
Expected<int> fuseLinearCrossEntropy(ir::Graph& forward, int chunks);

// Sets the chunk count of every fused-loss node (recomputed copies too). Nodes already at
// that count are not written, so setting a graph's own count changes and writes nothing.
void setLossChunks(ir::Graph& graph, int chunks);
// The chunk count of the graph's fused-loss nodes; 0 when it has none.
int lossChunksOf(const ir::Graph& graph);
// What auto tries on a joint graph: 1, 2, 4, ... up to kMaxAutoLossChunks and the rows of the
// smallest fused node.
std::vector<int> lossChunkCandidates(const ir::Graph& joint);

class FuseLossPass final : public Pass {
 public:
  explicit FuseLossPass(int chunks) : chunks_(chunks) {}
  std::string_view name() const override { return "fuse-loss"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  int chunks_;
};

}  // namespace gradc::passes
