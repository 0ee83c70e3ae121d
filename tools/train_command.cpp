// gradc train SPEC [--set k=v]... [--data FILE | --synthetic] [--steps N] [--lr X]
//   [--optimizer sgd|adamw] [--seed N] [--save DIR] [--save-every N] [--resume DIR]
//   [--metrics-out FILE.json] [--devices N [--loss-placement local|gather] [--bucket-mib M] [--timeout S]]
//
// With --devices N > 1 this process becomes the launcher: it starts N copies of the same
// command as worker processes (RANK, WORLD_SIZE, ... set; runtime/launcher.h) and supervises
// them. A process started with those variables already set (by this launcher, torchrun or
// Slurm) is a worker: it compiles its rank's step, joins the others over Gloo and trains.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>

#include <nlohmann/json.hpp>

#include "passes/budget.h"
#include "passes/optimizer.h"
#include "runtime/dist_env.h"
#include "runtime/gloo_communicator.h"
#include "runtime/launcher.h"
#include "runtime/trainer.h"
#include "tools/commands.h"
#include "tools/spec_loading.h"
#include "tools/training_step.h"

namespace gradc::tools {

namespace {
struct TrainCommandOptions {
  std::string spec;
  std::vector<std::string> sets;
  std::string data;
  bool synthetic = false;
  std::string vocab = "bytes";
  std::int64_t steps = 100;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double minLr = -1;
  double momentum = 0.9;
  double weightDecay = -1;
  double clipNorm = 0;
  std::int64_t warmupSteps = 0;
  std::int64_t decaySteps = 0;
  std::optional<std::uint64_t> seed;
  std::string save;
  std::int64_t saveEvery = 0;
  std::string resume;
  std::string metricsOut;
  bool quiet = false;
  bool profile = false;
  double timeoutS = 300;
  MemoryFlags memory;
  ParallelFlags parallel;
};

// This process's own command line, with argv[0] resolved to the running executable.
std::vector<std::string> ownCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!args.empty() && !ec) args[0] = exe.string();
  return args;
}

int runTrain(const TrainCommandOptions& o) {
  if (o.data.empty() == !o.synthetic) {
    std::cerr << "gradc: error: give exactly one of --data FILE and --synthetic\n";
    return kExitUserError;
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeoutS * 1000));
  Expected<std::optional<runtime::DistEnv>> env = runtime::distEnvFromEnvironment();
  if (!env) {
    std::cerr << "gradc: error: " << env.error().message << "\n";
    return kExitUserError;
  }
  const bool launcher = !*env && o.parallel.devices > 1;
  const int world = *env ? (*env)->worldSize : o.parallel.devices;
  const int rank = *env ? (*env)->rank : 0;
  if (*env && o.parallel.devices > 1 && o.parallel.devices != world) {
    std::cerr << "gradc: error: --devices " << o.parallel.devices << " disagrees with WORLD_SIZE=" << world << "\n";
    return kExitUserError;
  }
  ParallelFlags parallelFlags = o.parallel;
  parallelFlags.devices = world;
  Expected<passes::DataParallelOptions> parallel = parallelFlags.forRank(rank);
  if (!parallel) {
    std::cerr << "gradc: error: " << parallel.error().message << "\n";
    return kExitUserError;
  }
  const bool quiet = o.quiet || rank != 0;
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, o.sets, exitCode);
  if (!graph) return exitCode;

  passes::OptimizerOptions opt;
  opt.kind = o.optimizer == "sgd" ? passes::OptimizerOptions::Kind::Sgd : passes::OptimizerOptions::Kind::AdamW;
  opt.lr = o.lr;
  opt.momentum = o.momentum;
  opt.weightDecay = o.weightDecay;
  opt.clipNorm = o.clipNorm;
  opt.warmupSteps = o.warmupSteps;
  // Without --decay-steps the learning rate stays at --lr after warmup (as in plain PyTorch);
  // with it, it follows a cosine down to --min-lr over that many steps.
  opt.totalSteps = o.warmupSteps + std::max<std::int64_t>(o.decaySteps, 1);
  opt.minLr = o.decaySteps > 0 ? o.minLr : o.lr;

  int stepExit = kExitOk;
  std::optional<TrainingStep> step = buildTrainingStep(*graph, opt, o.memory, stepExit, *parallel);
  if (!step) return stepExit;
  if (world > 1)
    for (const auto& n : step->graph.nodes())
      if (n->opName() == "all_reduce_start" && n->result(0)->type().dtype == ir::DType::bf16) {
        std::cerr << "gradc: error: --devices " << world << ": CPU ranks communicate through Gloo, which cannot sum "
                  << "bf16 tensors (this model's gradients or loss are bf16); train it in f32 or f16, or on one device\n";
        return kExitUserError;
      }
  if (launcher && parallel->placement == passes::LossPlacement::Gather) {
    // The other ranks' graph differs from rank 0's (no loss, a receive): check it fits too.
    Expected<passes::DataParallelOptions> other = parallelFlags.forRank(1);
    if (!other || !buildTrainingStep(*graph, opt, o.memory, stepExit, *other)) return other ? stepExit : kExitUserError;
  }
  if (launcher) {
    // The ranks' steps compiled, so a spec, batch or budget error is reported once, here. Now
    // N workers run this same command, supervised until they all end.
    runtime::LaunchOptions launch;
    launch.devices = o.parallel.devices;
    launch.argv = ownCommandLine();
    launch.timeout = timeout;
    return runtime::launchWorkers(launch);
  }
  if (!quiet) {
    std::cerr << describeStep(*step) << "\n";
    if (world > 1) {
      std::vector<passes::GradientBucket> buckets = passes::gradientBuckets(step->graph);
      std::cerr << "data parallel: " << world << " ranks (gloo), loss placement "
                << passes::lossPlacementName(parallel->placement) << ", " << buckets.size()
                << " gradient bucket" << (buckets.size() == 1 ? "" : "s") << " of";
      for (const passes::GradientBucket& b : buckets) std::cerr << " " << passes::formatBytes(b.bytes);
      std::cerr << "\n";
    }
  }

  std::unique_ptr<runtime::Communicator> comm;
  if (world > 1) {
    Expected<std::unique_ptr<runtime::Communicator>> c = runtime::GlooCommunicator::create(**env, timeout);
    if (!c) {
      std::cerr << "gradc: error: rank " << rank << ": " << c.error().message << "\n";
      return kExitUserError;
    }
    comm = std::move(*c);
  }
  // The executor runs the scheduled graph and frees every value after its last use: what the
  // memory plan models, so the metrics can put its predicted peak beside the measured one.
  const std::int64_t plannedPeak = step->plan.peakBytes;

  runtime::TrainerOptions t;
  t.model = ir::getString(graph->attrs(), "model").value_or(graph->name());
  t.steps = o.steps;
  t.seed = o.seed ? *o.seed : static_cast<std::uint64_t>(ir::getInt(graph->attrs(), "seed").value_or(0));
  if (!o.data.empty()) t.data = o.data;
  t.vocabulary = o.vocab == "chars" ? runtime::VocabularyKind::characters : runtime::VocabularyKind::bytes;
  if (!o.save.empty()) t.saveDir = o.save;
  t.saveEvery = o.saveEvery;
  if (!o.resume.empty()) t.resumeDir = o.resume;
  t.progress = !quiet;
  t.comm = comm.get();
  t.profile = o.profile;
  t.plannedPeakBytes = plannedPeak;
  t.arenaPlan = arenaPlanOf(step->plan);
  nlohmann::json config = {{"spec", o.spec},
                           {"set", o.sets},
                           {"optimizer", o.optimizer},
                           {"lr", o.lr},
                           {"min_lr", opt.resolvedMinLr()},
                           {"weight_decay", opt.resolvedWeightDecay()},
                           {"momentum", o.momentum},
                           {"clip_norm", o.clipNorm},
                           {"warmup_steps", o.warmupSteps},
                           {"decay_steps", o.decaySteps},
                           {"budget", o.memory.budget},
                           {"remat", std::string(passes::rematStrategyName(step->remat.chosen))},
                           {"micro_batches", step->microBatches},
                           {"devices", world},
                           {"loss_placement", std::string(passes::lossPlacementName(parallel->placement))}};
  t.config = config.dump();

  Expected<runtime::TrainResult> result = runtime::train(step->graph, t);
  if (!result) {
    const std::string& message = result.error().message;
    const bool named = message.rfind("rank ", 0) == 0;
    std::cerr << "gradc: error: " << (world > 1 && !named ? "rank " + std::to_string(rank) + ": " : "") << message
              << "\n";
    return kExitUserError;
  }
  if (rank != 0) return kExitOk;  // rank 0 reports and writes the metrics of every rank
  const runtime::RunMetrics& m = result->metrics;
  if (!m.steps.empty() && !quiet)
    std::cerr << "trained " << m.model << " to step " << m.steps.back().step << ": loss " << m.steps.front().loss
              << " -> " << m.steps.back().loss << "; peak memory " << m.ranks.front().peakBytesMeasured
              << " bytes measured, " << plannedPeak << " planned\n";
  if (!o.metricsOut.empty())
    if (Status s = runtime::writeMetrics(o.metricsOut, m); !s) {
      std::cerr << "gradc: error: " << s.message() << "\n";
      return kExitInternal;
    }
  return kExitOk;
}
}  // namespace

Runner addTrainCommand(CLI::App& cmd) {
  auto o = std::make_shared<TrainCommandOptions>();
  cmd.add_option("spec", o->spec, "The YAML model spec")->required();
  cmd.add_option("--set", o->sets, "Override a dim (or seed): --set batch=64 (repeatable)");
  cmd.add_option("--data", o->data, "Text file to train on (byte-level tokens)");
  cmd.add_flag("--synthetic", o->synthetic, "Train on deterministic synthetic data instead of a file");
  cmd.add_option("--vocab", o->vocab, "Token vocabulary for --data: bytes (256) or chars (the file's distinct bytes)")
      ->check(CLI::IsMember({"bytes", "chars"}))
      ->capture_default_str();
  cmd.add_option("--steps", o->steps, "Train until this step")->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--optimizer", o->optimizer, "sgd or adamw")->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  cmd.add_option("--lr", o->lr, "Peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--min-lr", o->minLr, "Floor of the cosine decay (default 0.1 x lr)");
  cmd.add_option("--momentum", o->momentum, "SGD momentum (0: plain SGD)")->capture_default_str();
  cmd.add_option("--weight-decay", o->weightDecay, "Weight decay (default: 0 for SGD, 0.01 for AdamW)");
  cmd.add_option("--clip-norm", o->clipNorm, "Clip the global gradient norm to this value (0: off)")->capture_default_str();
  cmd.add_option("--warmup-steps", o->warmupSteps, "Linear learning-rate warmup")->capture_default_str();
  cmd.add_option("--decay-steps", o->decaySteps, "Cosine decay length after warmup (0: constant lr)")->capture_default_str();
  cmd.add_option("--seed", o->seed, "Seed of initialisation, data order and dropout (default: the spec's seed)");
  cmd.add_option("--save", o->save, "Checkpoint folder, written atomically (weights.safetensors loads in PyTorch)");
  cmd.add_option("--save-every", o->saveEvery, "Also checkpoint every N steps (0: only at the end)")->capture_default_str();
  cmd.add_option("--resume", o->resume, "Continue from this checkpoint folder, bit for bit");
  cmd.add_option("--metrics-out", o->metricsOut, "Write per-step metrics and peak memory as JSON");
  cmd.add_flag("-q,--quiet", o->quiet, "No progress output");
  cmd.add_flag("--profile", o->profile, "At the end, print the time per op kind (steps after the first)");
  cmd.add_option("--timeout", o->timeoutS,
                 "Seconds a rank waits for the others (rendezvous, each collective) before the run fails")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  o->memory.addTo(cmd);
  o->parallel.addTo(cmd);
  return [o] { return runTrain(*o); };
}

}  // namespace gradc::tools
