#include "tools/batch_choice.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <algorithm>
#include <numeric>

#include "frontend/spec.h"
#include "passes/budget.h"
#include "passes/data_parallel.h"
#include "passes/micro_batch.h"
#include "passes/plan/training_planner.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "tools/spec_loading.h"

namespace gradc::tools {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string plural(std::int64_t n, const char* one, const char* many) { return n == 1 ? one : many; }

// The spec lowered at NAME=value (the other --set overrides kept); its diagnostics as the error.
Expected<frontend::SpecResult> lowerAt(const std::string& source, const std::string& path,
                                       std::vector<std::pair<std::string, std::string>> overrides,
                                       const std::string& dim, std::optional<std::int64_t> value) {
  if (value) overrides.emplace_back(dim, std::to_string(*value));
  frontend::SpecOptions options;
  options.overrides = std::move(overrides);
  frontend::SpecResult result = frontend::compileSpec(source, path, options);
  if (!result.ok()) {
    std::string message;
    for (const frontend::Diagnostic& d : result.diagnostics) message += frontend::formatDiagnostic(d, source);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return Error{message};
  }
  return result;
}

// What a fitting probe's plan does: "remat chain (12.0% recompute), 2 micro-batches".
std::string planLine(const passes::TrainingPlanReport& report) {
  std::string line = fmt::format("remat {}", passes::rematStrategyName(report.chosen));
  if (report.recomputeFlops > 0) line += fmt::format(" ({:.1f}% recompute)", report.recomputePercent());
  const passes::PlanConfig& config = report.config;
  line += fmt::format(", {} micro-batch{}", config.microBatches, config.microBatches == 1 ? "" : "es");
  if (config.fusedLoss())
    line += fmt::format(", fused loss in {} chunk{}", config.lossChunks, config.lossChunks == 1 ? "" : "s");
  if (config.zero != passes::ZeroStage::Replicated)
    line += fmt::format(", ZeRO stage {}", passes::zeroStageNumber(config.zero));
  return line;
}

}  // namespace

std::string BatchChoice::describe() const {
  std::string line = fmt::format("batch: {}={}", dim, global());
  if (world > 1) line += fmt::format(" ({} per rank on {} ranks)", perRank(), world);
  const std::string multipleText = multiple > 1 ? fmt::format(" multiple of {}", multiple) : std::string();
  if (throughput) {
    line += fmt::format(", the batch{} with the most predicted samples per second under the budget of {} ({:.1f}/s, "
                        "{:.3f} s per step; predicted peak {}: {})",
                        multipleText, passes::formatBytes(budgetBytes), samplesPerSecond(chosen), chosen.stepSeconds,
                        passes::formatBytes(chosen.peakBytes), chosen.plan);
    if (search.chosen && search.chosen->batch != chosen.batch)
      line += fmt::format("; the largest that fits, {}, predicts {:.1f}/s ({})", search.chosen->batch * world,
                          samplesPerSecond(*search.chosen), search.chosen->plan);
  } else {
    line += fmt::format(", the largest{} whose step fits the budget of {} (predicted peak {}: {})", multipleText,
                        passes::formatBytes(budgetBytes), passes::formatBytes(chosen.peakBytes), chosen.plan);
  }
  if (search.next)
    line += fmt::format("; {} {} needs at least {}", world > 1 ? "per-rank batch" : "batch",
                        search.next->batch, passes::formatBytesExact(search.next->smallestFeasibleBytes));
  if (search.reachedMax) line += "; larger batches were not searched";
  const size_t planned = search.probes.size() + candidates.size() + static_cast<size_t>(zeroRecomputeProbes);
  line += fmt::format("; {} {} planned in {:.1f} s", planned, plural(static_cast<std::int64_t>(planned), "batch", "batches"),
                      seconds);
  return line;
}

namespace {

nlohmann::json probeJson(const passes::BatchProbe& p) {
  nlohmann::json j = {{"batch", p.batch}, {"fits", p.fits}, {"seconds", p.seconds}};
  if (p.fits) {
    j["peak_bytes"] = p.peakBytes;
    j["plan"] = p.plan;
    if (p.stepSeconds > 0) j["predicted_step_seconds"] = p.stepSeconds;
  } else {
    j["smallest_feasible_bytes"] = p.smallestFeasibleBytes;
  }
  return j;
}

}  // namespace

nlohmann::json BatchChoice::toJson() const {
  nlohmann::json probes = nlohmann::json::array();
  for (const passes::BatchProbe& p : search.probes) probes.push_back(probeJson(p));
  nlohmann::json j = {{"dim", dim},           {"per_rank", perRank()},   {"global", global()},
                      {"devices", world},     {"multiple", multiple},    {"budget_bytes", budgetBytes},
                      {"probes", probes},     {"seconds", seconds},      {"summary", describe()},
                      {"peak_bytes", chosen.peakBytes},
                      {"objective", throughput ? "throughput" : "largest"}};
  if (search.chosen) j["largest_per_rank"] = search.chosen->batch;
  if (throughput) {
    nlohmann::json compared = nlohmann::json::array();
    for (const passes::BatchProbe& p : candidates) compared.push_back(probeJson(p));
    j["compared"] = compared;
    j["predicted_step_seconds"] = chosen.stepSeconds;
    j["predicted_samples_per_second"] = samplesPerSecond(chosen);
  }
  if (search.next)
    j["next"] = {{"per_rank", search.next->batch}, {"smallest_feasible_bytes", search.next->smallestFeasibleBytes}};
  return j;
}

int resolveAutoBatch(const BatchRequest& r, std::vector<std::string>& sets, std::optional<BatchChoice>& choice) {
  choice.reset();
  const MemoryFlags& memory = *r.memory;
  const ParallelFlags& parallel = *r.parallel;
  // Which dim is auto (the last --set of a name wins, as for any --set).
  std::optional<std::string> dim;
  std::vector<std::pair<std::string, std::string>> overrides;  // the others, in order
  std::vector<std::string> superseded;                         // NAME=auto before an explicit NAME=B
  for (const std::string& kv : sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // parseSetOverrides reports it
    std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (value == "auto") {
      if (dim && *dim != name) {
        std::cerr << "gradc: error: --set " << *dim << "=auto and --set " << name
                  << "=auto: one dim is searched, the batch\n";
        return kExitUserError;
      }
      dim = name;
      continue;
    }
    if (dim && name == *dim) {  // a later explicit value wins
      superseded.push_back(name + "=auto");
      dim.reset();
    }
    overrides.emplace_back(std::move(name), std::move(value));
  }
  std::erase_if(sets, [&](const std::string& kv) {
    return std::find(superseded.begin(), superseded.end(), kv) != superseded.end();
  });
  if (!dim) {
    if (memory.batchMultiple > 0) {
      std::cerr << "gradc: error: --batch-multiple applies to a searched batch: give --set batch=auto with it\n";
      return kExitUserError;
    }
    return kExitOk;
  }
  std::erase_if(overrides, [&](const auto& o) { return o.first == *dim; });
  if (memory.budget.empty()) {
    std::cerr << "gradc: error: --set " << *dim << "=auto needs --budget: the largest batch whose step fits it\n";
    return kExitUserError;
  }
  const int world = parallel.devices;
  std::optional<passes::TrainingPlanOptions> options =
      parseTrainingPlanOptions(memory, r.optimizer, r.kernelThreads > 0 ? r.kernelThreads : kernelThreadsFor(world));
  if (!options) return kExitUserError;
  Expected<passes::DataParallelOptions> rankZero = parallel.forRank(0);
  if (!rankZero) {
    std::cerr << "gradc: error: " << rankZero.error().message << "\n";
    return kExitUserError;
  }
  if (rankZero->communicates()) options->dataParallel = *rankZero;

  BatchChoice c;
  c.dim = *dim;
  c.world = world;
  c.budgetBytes = *options->plan.budgetBytes;
  c.multiple = std::max<std::int64_t>(memory.batchMultiple, 1);
  if (options->microBatches > 1) c.multiple = std::lcm(c.multiple, static_cast<std::int64_t>(options->microBatches));

  Expected<std::string> source = readInput(r.spec, static_cast<size_t>(frontend::SpecOptions{}.maxSourceBytes));
  if (!source) {
    std::cerr << "gradc: error: " << source.error().message << "\n";
    return kExitUserError;
  }
  // The spec as written: the dim exists, and its own value is where the search starts.
  Expected<frontend::SpecResult> asWritten = lowerAt(*source, r.spec, overrides, *dim, std::nullopt);
  if (!asWritten) {
    std::cerr << asWritten.error().message << "\n";
    return kExitUserError;
  }
  std::optional<std::int64_t> written;
  for (const auto& [name, value] : asWritten->dims)
    if (name == *dim) written = value;
  if (!written) {
    std::string names;
    for (const auto& d : asWritten->dims) names += (names.empty() ? "'" : ", '") + d.first + "'";
    std::cerr << "gradc: error: --set " << *dim << "=auto: the spec has no dim '" << *dim << "'"
              << (names.empty() ? std::string(" (it has no dims)") : " (its dims are " + names + ")") << "\n";
    return kExitUserError;
  }
  const bool splits = passes::batchSplitsExactly(*asWritten->graph);
  asWritten->graph.reset();

  const Clock::time_point started = Clock::now();
  passes::BatchOracle probe = [&](std::int64_t batch) -> Expected<passes::BatchProbe> {
    const Clock::time_point start = Clock::now();
    const std::int64_t globalBatch = batch * world;
    Expected<frontend::SpecResult> lowered = lowerAt(*source, r.spec, overrides, *dim, globalBatch);
    if (!lowered) return Error{"at " + *dim + "=" + std::to_string(globalBatch) + ":\n" + lowered.error().message};
    ir::Graph& forward = *lowered->graph;
    Expected<std::int64_t> extent = passes::batchSize(forward);
    if (!extent)
      return Error{"--set " + *dim + "=auto: the spec's inputs have no batch axis to size (" + extent.error().message +
                   ")"};
    if (*extent != globalBatch)
      return Error{"--set " + *dim + "=auto: dim '" + *dim + "' does not size the batched inputs: at " + *dim + "=" +
                   std::to_string(globalBatch) + " their leading extent is " + std::to_string(*extent) +
                   " (auto searches the dim that is the inputs' first axis)"};
    if (r.kernelThreads > 0) forward.setKernelThreads(r.kernelThreads);
    forward.setKernelTarget(kernelTargetOf(*r.memory));
    std::optional<ir::Graph> shard;
    if (options->dataParallel) {
      Expected<ir::Graph> p = passes::partitionForward(forward, *options->dataParallel);
      if (!p) return Error{"--devices " + std::to_string(world) + ": " + p.error().message};
      shard = std::move(*p);
    }
    Expected<passes::TrainingPlan> plan = passes::chooseTrainingPlan(shard ? *shard : forward, *options);
    passes::BatchProbe result;
    if (plan) {
      result.fits = true;
      result.peakBytes = plan->report.predictedPeakBytes + options->plan.reserveBytes;
      result.plan = planLine(plan->report);
      result.stepSeconds = plan->report.predictedStepSeconds;
    } else if (plan.error().kind == ErrorKind::InfeasibleBudget && plan.error().smallestFeasibleBytes > 0) {
      result.smallestFeasibleBytes = plan.error().smallestFeasibleBytes;
    } else {
      return Error{"at " + *dim + "=" + std::to_string(globalBatch) + ": " + plan.error().message, plan.error().kind};
    }
    result.seconds = secondsSince(start);
    return result;
  };
  passes::BatchSearchOptions search;
  search.budgetBytes = c.budgetBytes;
  search.multiple = c.multiple;
  search.start = std::max<std::int64_t>(*written / world, 1);
  // Under --micro-batches auto a batch splits only into its divisors up to
  // kMaxAutoMicroBatches: a prime batch cannot be split at all, so feasibility is monotone only
  // over batches that every count divides. The search runs over multiples of that many; when
  // not even one fits, over the smaller multiples of the asked one.
  const bool autoMicro = options->microBatches == 0 && splits;
  if (autoMicro) search.multiple = std::lcm(c.multiple, static_cast<std::int64_t>(passes::kMaxAutoMicroBatches));
  Expected<passes::BatchSearchResult> found = passes::searchLargestBatch(probe, search);
  if (found && autoMicro && found->batch == 0 && search.multiple > c.multiple) {
    const passes::BatchSearchResult coarse = std::move(*found);
    const passes::BatchProbe& smallest = *coarse.next;  // the first multiple of 64, refused
    search.maxBatch = search.multiple - 1;
    search.multiple = c.multiple;
    search.start = std::min(search.start, search.maxBatch);
    found = passes::searchLargestBatch(probe, search);
    if (found) {
      found->probes.insert(found->probes.begin(), coarse.probes.begin(), coarse.probes.end());
      if (found->batch == 0) {
        found->next = smallest.batch < found->next->batch ? smallest : *found->next;
      } else if (found->reachedMax && smallest.batch == found->batch + c.multiple) {
        found->next = smallest;  // the next multiple is the refused 64
        found->reachedMax = false;
      }
    }
  } else if (found) {
    c.multiple = search.multiple;
  }
  if (!found) {
    std::cerr << "gradc: error: " << found.error().message << "\n";
    return exitCodeFor(found.error());
  }
  c.search = std::move(*found);
  c.seconds = secondsSince(started);
  if (c.search.batch == 0) {
    const passes::BatchProbe& smallest = *c.search.next;
    std::cerr << "gradc: error: --set " << *dim << "=auto: no batch fits the budget of "
              << passes::formatBytesExact(c.budgetBytes) << ": the smallest, " << *dim << "="
              << smallest.batch * world << (world > 1 ? " (" + std::to_string(smallest.batch) + " per rank)" : "")
              << ", needs " << passes::formatBytesExact(smallest.smallestFeasibleBytes)
              << " (its smallest feasible budget)\n";
    return kExitUserError;
  }
  c.chosen = *c.search.chosen;
  if (options->plan.objective.goal == passes::PlanGoal::Throughput) {
    c.throughput = true;
    // The batches compared: every fitting probe, the largest halved (in multiples), and the
    // largest that fits without recompute (a search of its own, capped at 0%).
    std::vector<passes::BatchProbe> compared;
    for (const passes::BatchProbe& p : c.search.probes)
      if (p.fits) compared.push_back(p);
    auto known = [&](std::int64_t b) {
      return std::any_of(compared.begin(), compared.end(), [&](const passes::BatchProbe& p) { return p.batch == b; });
    };
    std::vector<std::int64_t> more;
    for (std::int64_t b = c.search.batch / 2; b >= c.multiple && more.size() < 4; b /= 2)
      more.push_back(b / c.multiple * c.multiple);
    passes::TrainingPlanOptions uncapped = *options;
    options->plan.objective.maxRecomputePercent = 0;
    Expected<passes::BatchSearchResult> plain = passes::searchLargestBatch(probe, search);
    *options = uncapped;
    if (plain) c.zeroRecomputeProbes = static_cast<int>(plain->probes.size());
    if (plain && plain->batch > 0) more.push_back(plain->batch);
    for (std::int64_t b : more) {
      if (b < c.multiple || known(b)) continue;
      Expected<passes::BatchProbe> p = probe(b);
      if (!p) {
        std::cerr << "gradc: error: " << p.error().message << "\n";
        return exitCodeFor(p.error());
      }
      p->batch = b;
      if (p->fits) compared.push_back(*p);
      c.candidates.push_back(*p);
    }
    for (const passes::BatchProbe& p : compared)
      if (c.samplesPerSecond(p) > c.samplesPerSecond(c.chosen)) c.chosen = p;
    c.seconds = secondsSince(started);
  }
  std::erase_if(sets, [&](const std::string& kv) { return kv.rfind(*dim + "=", 0) == 0; });
  sets.push_back(*dim + "=" + std::to_string(c.global()));
  choice = std::move(c);
  return kExitOk;
}

}  // namespace gradc::tools
