// remat_curve: recompute against peak for one model's training step (AdamW), as JSON (for a
// plot, or a table in docs/remat.md). Points:
//   - "auto": the planner (passes::chooseTrainingPlan, --remat auto, one micro-batch, the loss
//     unfused) at N budgets from the smallest feasible one to the step without recompute;
//   - "sqrt", "memory-poor", "selective", "none": each strategy's plan without a budget;
//   - "checkpoint_sequential": PyTorch's torch.utils.checkpoint.checkpoint_sequential with k
//     segments, every k up to 16 and then about 1.5x apart up to the chain's stages
//     (passes::remat::segmentsCandidate):
//     what each segment choice costs when planned and run by the same runtime.
// Every peak is the scheduled plan's (the one gradc emits, and measures to the byte).
//
//   remat_curve MODEL.yaml [--set name=value]... [--budgets N]   (N = 30 by default; 0: only
//   checkpoint_sequential's points)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_spec.h"
#include "bench/segment_points.h"
#include "frontend/spec.h"
#include "passes/autodiff.h"
#include "passes/budget.h"
#include "passes/dce.h"
#include "passes/fuse_loss.h"
#include "passes/micro_batch.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "runtime/backends/kernel_targets.h"

using namespace gradc;

namespace {

struct Point {
  std::string series;
  std::string plan;
  std::int64_t budget = -1;
  std::int64_t peak = 0;
  std::int64_t recomputeFlops = 0;
};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  if (argc < 2) {
    std::fprintf(stderr, "usage: remat_curve MODEL.yaml [--set name=value]... [--budgets N]\n");
    return 2;
  }
  frontend::SpecOptions options;
  int budgets = 30;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set" && i + 1 < argc) {
      std::optional<std::pair<std::string, std::string>> set = bench::splitOverride(argv[++i]);
      if (!set) {
        std::fprintf(stderr, "remat_curve: --set takes name=value\n");
        return 2;
      }
      options.overrides.push_back(std::move(*set));
    } else if (arg == "--budgets" && i + 1 < argc) {
      budgets = std::max(0, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "remat_curve: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  std::optional<frontend::SpecResult> spec = bench::compileBenchSpec("remat_curve", argv[1], options);
  if (!spec) return 1;
  passes::TrainingPlanOptions plan;
  plan.lossChunks.mode = passes::LossChunking::Mode::Off;
  std::vector<Point> points;
  std::int64_t forwardFlops = 0;
  auto chosen = [&](passes::RematStrategy strategy, std::optional<std::int64_t> budget) -> Expected<passes::TrainingPlan> {
    passes::TrainingPlanOptions o = plan;
    o.remat = strategy;
    o.plan.budgetBytes = budget;
    return passes::chooseTrainingPlan(*spec->graph, o);
  };
  // Each strategy without a budget (with --budgets 0 only none, for the FLOPs).
  for (passes::RematStrategy s : {passes::RematStrategy::None, passes::RematStrategy::Selective,
                                  passes::RematStrategy::Sqrt, passes::RematStrategy::MemoryPoor}) {
    Expected<passes::TrainingPlan> c = chosen(s, std::nullopt);
    if (!c) {
      std::fprintf(stderr, "remat_curve: %s\n", c.error().message.c_str());
      return 1;
    }
    forwardFlops = c->report.forwardFlops;
    points.push_back({std::string(passes::rematStrategyName(s)), c->report.plan, -1, c->report.predictedPeakBytes,
                      c->report.recomputeFlops});
    if (budgets == 0) break;
  }
  // The planner over budgets: from the smallest feasible one to the step without recompute.
  if (budgets > 0) {
    const std::int64_t top = points.front().peak;
    Expected<passes::TrainingPlan> tight = chosen(passes::RematStrategy::Auto, 1);
    const std::optional<std::int64_t> smallest =
        tight ? std::optional<std::int64_t>(tight->report.predictedPeakBytes)
              : tight.error().kind == ErrorKind::InfeasibleBudget
                    ? std::optional<std::int64_t>(tight.error().smallestFeasibleBytes)
                    : std::nullopt;
    if (!smallest) {
      std::fprintf(stderr, "remat_curve: no smallest feasible budget\n");
      return 1;
    }
    for (int i = 0; i < budgets; ++i) {
      const std::int64_t b = *smallest + (top - *smallest) * i / std::max(1, budgets - 1);
      Expected<passes::TrainingPlan> c = chosen(passes::RematStrategy::Auto, b);
      if (!c) continue;
      points.push_back({"auto", c->report.plan, b, c->report.predictedPeakBytes, c->report.recomputeFlops});
    }
  }
  // checkpoint_sequential's segment choices, on the same step.
  Expected<passes::TrainingPlan> base = chosen(passes::RematStrategy::None, std::nullopt);
  ir::Graph& g = base->graph;
  Expected<passes::remat::Analysis> a = passes::remat::analyze(g);
  if (!a) {
    std::fprintf(stderr, "remat_curve: %s\n", a.error().message.c_str());
    return 1;
  }
  for (const bench::SegmentPoint& sp : bench::checkpointSequentialPoints(g, *a))
    points.push_back({"checkpoint_sequential", sp.plan, -1, sp.peak, sp.recomputeFlops});
  const int stages = a->episodes.empty() ? 0 : a->episodes[0].rawStages;
  std::printf("{\"model\": %s, \"forward_flops\": %lld, \"chain_stages\": %d, \"points\": [\n", quoted(argv[1]).c_str(),
              static_cast<long long>(forwardFlops), stages);
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    std::printf("  {\"series\": %s, \"plan\": %s, \"budget\": %lld, \"peak\": %lld, \"recompute_flops\": %lld}%s\n",
                quoted(p.series).c_str(), quoted(p.plan).c_str(), static_cast<long long>(p.budget),
                static_cast<long long>(p.peak), static_cast<long long>(p.recomputeFlops),
                i + 1 < points.size() ? "," : "");
  }
  std::printf("]}\n");
  return 0;
}
