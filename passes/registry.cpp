#include "passes/registry.h"

#include <functional>
#include <utility>

#include "passes/autodiff.h"
#include "passes/batch_norm_inference.h"
#include "passes/dce.h"
#include "passes/fuse.h"
#include "passes/optimizer.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/strip_dropout.h"

namespace gradc::passes {

namespace {
using Factory = std::unique_ptr<Pass> (*)();
const std::vector<std::pair<std::string_view, Factory>>& factories() {
  static const std::vector<std::pair<std::string_view, Factory>> list = {
      {"dce", [] { return std::unique_ptr<Pass>(std::make_unique<DeadCodeElimination>()); }},
      {"autodiff", [] { return std::unique_ptr<Pass>(std::make_unique<Autodiff>()); }},
      {"optimizer", [] { return std::unique_ptr<Pass>(std::make_unique<OptimizerPass>()); }},
      {"fuse", [] { return std::unique_ptr<Pass>(std::make_unique<FuseElementwise>()); }},
      {"strip-dropout", [] { return std::unique_ptr<Pass>(std::make_unique<StripDropout>()); }},
      {"batch-norm-inference", [] { return std::unique_ptr<Pass>(std::make_unique<BatchNormInference>()); }},
      // Without a budget (gradc opt has no flag for one): Chen's sqrt plan.
      {"schedule", [] { return std::unique_ptr<Pass>(std::make_unique<Schedule>()); }},
      {"remat", [] { return std::unique_ptr<Pass>(std::make_unique<RematPass>(RematStrategy::Sqrt)); }},
  };
  return list;
}
}  // namespace

std::unique_ptr<Pass> createPass(std::string_view name) {
  for (const auto& [n, make] : factories())
    if (n == name) return make();
  return nullptr;
}

std::vector<std::string_view> passNames() {
  std::vector<std::string_view> names;
  for (const auto& [n, make] : factories()) names.push_back(n);
  return names;
}

}  // namespace gradc::passes
