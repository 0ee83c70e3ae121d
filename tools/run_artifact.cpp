#include "tools/run_artifact.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "runtime/comm/dist_env.h"
#include "runtime/comm/launcher.h"
#include "runtime/comm/library_logging.h"
#include "runtime/backends/backends.h"
#include "runtime/device/device.h"
#include "runtime/backends/device_select.h"
#include "runtime/device/host_memory.h"
#include "runtime/io/artifact.h"
#include "runtime/io/atomic_file.h"
#include "runtime/core/json_text.h"
#include "runtime/kernels/blas_kernels.h"
#include "runtime/kernels/host_products.h"
#include "runtime/kernels/generated_kernels.h"
#include "runtime/train/trainer.h"
#include "tools/commands.h"
#include "tools/failure_guard.h"
#include "tools/flag_checks.h"

namespace gradc::tools {

namespace {

// An artifact's text for the terminal: control characters (escape sequences that would move the
// cursor, recolour or retitle the terminal) shown as '?', and at most 4 KiB of it.
std::string terminalText(std::string_view text) {
  constexpr std::size_t kLimit = 4096;
  std::string out;
  for (char c : text.substr(0, kLimit)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f ? '?' : c;
  }
  if (text.size() > kLimit) out += "... (" + std::to_string(text.size() - kLimit) + " more bytes)";
  return out;
}

// The string at `path` of the manifest's flags (keys of nested objects), terminal-safe; nullopt
// when any step is missing or of another type.
std::optional<std::string> flagText(const nlohmann::json& flags, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &flags;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return std::nullopt;
    at = &(*at)[key];
  }
  if (!at->is_string()) return std::nullopt;
  return terminalText(at->get<std::string>());
}

}  // namespace

void RunFlags::addTo(CLI::App& cmd) {
  cmd.add_option("--data", data, "File to train on: text (--vocab bytes or chars) or tokens (--vocab-size)");
  cmd.add_flag("--synthetic", synthetic, "Train on deterministic synthetic data instead of a file");
  cmd.add_option("--vocab", vocab, "Token vocabulary for --data: bytes (256) or chars (the file's distinct bytes)")
      ->check(CLI::IsMember({"bytes", "chars"}))
      ->capture_default_str();
  cmd.add_option("--vocab-size", vocabSize,
                 "--data is a token file of ids in [0, N): nanoGPT's .bin (uint16, no header) or llm.c's (recognised "
                 "by its header even without this flag, which then defaults to the model's vocabulary); memory-mapped")
      ->check(integerIn(2, 65536))
      ->excludes("--vocab");
  cmd.add_option("--sampling", sampling,
                 "epoch: every window once per epoch, shuffled; random: windows at random offsets with replacement, "
                 "as nanoGPT draws them (both resume exactly)")
      ->check(CLI::IsMember({"epoch", "random"}))
      ->capture_default_str();
  cmd.add_option("--steps", steps, "Train until this step")->check(positiveInteger())->capture_default_str();
  cmd.add_option("--seed", seed, "Seed of initialisation, data order and dropout (default: the spec's seed)")
      ->check(nonNegativeInteger());
  cmd.add_option("--save", save, "Checkpoint folder, written atomically (weights.safetensors loads in PyTorch)");
  cmd.add_option("--save-every", saveEvery, "Also checkpoint every N steps (0: only at the end)")
      ->check(nonNegativeInteger())
      ->capture_default_str();
  cmd.add_option("--resume", resume, "Continue from this checkpoint folder, bit for bit");
  cmd.add_option("--init-from", initFrom,
                 "Fine-tune: start from the parameters of this weights file (safetensors, gradc's names) or "
                 "checkpoint folder, with a fresh optimizer and schedule; every parameter must be there with its "
                 "shape, and nothing else")
      ->excludes("--resume");
  cmd.add_option("--val-data", valData,
                 "Validation file, read like --data with the training data's vocabulary: its loss (evaluation mode, "
                 "planned inside the step's arena and budget) in the progress line, the metrics and the trace");
  cmd.add_option("--eval-every", evalEvery, "Evaluate --val-data after every N steps, and after the last (0: the last only)")
      ->check(nonNegativeInteger())
      ->capture_default_str();
  cmd.add_option("--eval-batches", evalBatches,
                 "Evaluate K batches spread evenly over --val-data, the same K every time (0: every full batch)")
      ->check(nonNegativeInteger())
      ->capture_default_str();
  cmd.add_option("--save-best", saveBest, "Checkpoint folder that keeps the step with the lowest validation loss");
  cmd.add_option("--metrics-out", metricsOut, "Write per-step metrics and peak memory as JSON");
  cmd.add_option("--trace-out", traceOut,
                 "Write a Chrome trace-event file (Perfetto, chrome://tracing): every node of every step of every "
                 "rank, communication on its own track, live bytes as a counter");
  cmd.add_flag("-q,--quiet", quiet, "No progress output");
  cmd.add_flag("--profile", profile, "At the end, print the time per op kind (steps after the first)");
  cmd.add_option("--cost-table-out", costTableOut,
                 "With --profile: fit each op kind's kernel time and write the table, for --objective throughput "
                 "--cost-table FILE");
  cmd.add_flag("--trust-kernels", trustKernels,
               "Load the artifact's native kernels even when they were not compiled by this user on this machine "
               "(docs/artifact.md: the kernels are machine code run in this process)");
  cmd.add_flag("--no-generated-kernels", noGeneratedKernels,
               "Run the artifact's reference step: its fused regions as ATen kernels, planned on their own; no native "
               "code from the artifact is loaded (docs/artifact.md)");
  cmd.add_flag("--verbose", verbose,
               "Also print the log lines of the libraries underneath (c10d, Gloo, ATen warnings); gradc's own "
               "messages say what happened either way");
  cmd.add_option("--timeout", timeoutS,
                 "Seconds a rank waits for the others (rendezvous, each collective) before the run fails")
      ->check(positiveNumber())
      ->capture_default_str();
  std::vector<std::string> devices{"auto"};
  for (const runtime::Backend& b : runtime::backends()) devices.emplace_back(b.name);
  cmd.add_option("--device", device,
                 "Where each rank runs: cpu, cuda (GPU LOCAL_RANK of this machine), reference (the CPU with the portable "
                 "ATen kernels only) or auto (cuda when this gradc "
                 "supports GPUs and one is visible, else cpu)")
      ->check(CLI::IsMember(devices))
      ->capture_default_str();
}

std::vector<std::string> RunFlags::toArgs() const {
  std::vector<std::string> a;
  if (!data.empty()) a.insert(a.end(), {"--data", data});
  if (synthetic) a.push_back("--synthetic");
  a.insert(a.end(), {vocabSize > 0 ? "--vocab-size" : "--vocab", vocabSize > 0 ? std::to_string(vocabSize) : vocab,
                     "--sampling", sampling, "--steps", std::to_string(steps)});
  if (seed) a.insert(a.end(), {"--seed", std::to_string(*seed)});
  if (!save.empty()) a.insert(a.end(), {"--save", save});
  a.insert(a.end(), {"--save-every", std::to_string(saveEvery)});
  if (!resume.empty()) a.insert(a.end(), {"--resume", resume});
  if (!initFrom.empty()) a.insert(a.end(), {"--init-from", initFrom});
  if (!metricsOut.empty()) a.insert(a.end(), {"--metrics-out", metricsOut});
  if (!traceOut.empty()) a.insert(a.end(), {"--trace-out", traceOut});
  if (!valData.empty())
    a.insert(a.end(), {"--val-data", valData, "--eval-every", std::to_string(evalEvery), "--eval-batches",
                       std::to_string(evalBatches)});
  if (!saveBest.empty()) a.insert(a.end(), {"--save-best", saveBest});
  if (quiet) a.push_back("--quiet");
  if (profile) a.push_back("--profile");
  if (!costTableOut.empty()) {
    a.push_back("--cost-table-out");
    a.push_back(costTableOut);
  }
  if (verbose) a.push_back("--verbose");
  if (trustKernels) a.push_back("--trust-kernels");
  if (noGeneratedKernels) a.push_back("--no-generated-kernels");
  a.insert(a.end(), {"--timeout", fmt::format("{}", timeoutS)});
  a.insert(a.end(), {"--device", device});
  return a;
}

Expected<const runtime::Backend*> chooseBackend(const RunFlags& flags, int localRanks) {
  Expected<runtime::DeviceChoice> choice = runtime::parseDeviceChoice(flags.device);
  if (!choice) return choice.error();
  return runtime::resolveBackend(*choice, localRanks);
}

std::string ownExecutable() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("gradc") : exe.string();
}

namespace {

// A budget a user can type, rounded down: "21GiB", "900MiB".
std::string budgetText(std::int64_t bytes) {
  if (bytes >= (std::int64_t{1} << 30)) return std::to_string(bytes >> 30) + "GiB";
  return std::to_string(std::max<std::int64_t>(1, bytes >> 20)) + "MiB";
}

// The memory preflight. GRADC_NO_MEMORY_CHECK=1 skips it (a host with swap the user wants used).
Status checkHostMemory(const std::filesystem::path& dir, const runtime::ArtifactManifest& manifest,
                       const runtime::RankProgram& own, bool allRanks, runtime::StepVariant variant) {
  if (const char* skip = std::getenv("GRADC_NO_MEMORY_CHECK"); skip && std::string_view(skip) == "1") return {};
  std::optional<runtime::HostMemory> host = runtime::availableHostMemory();
  if (!host) return {};
  std::int64_t needed = own.plan.arenaBytes, largest = own.plan.arenaBytes;
  if (allRanks)
    for (int r = 1; r < manifest.world(); ++r) {
      Expected<ir::MemoryPlan> plan = runtime::loadRankPlan(dir, manifest, r, variant);
      if (!plan) return plan.error();
      needed += plan->arenaBytes;
      largest = std::max(largest, plan->arenaBytes);
    }
  if (needed <= host->availableBytes) return {};
  const int ranks = allRanks ? manifest.world() : 1;
  std::string message = fmt::format("the training step needs {} per device (its memory plan's arena)",
                                    runtime::describeBytes(largest));
  if (ranks > 1) message += fmt::format(", {} for the {} ranks on this host", runtime::describeBytes(needed), ranks);
  message += fmt::format(", but this host has {} available ({}); compile with a --budget below that (gradc compile "
                         "SPEC --budget {} -o DIR: recompute and micro-batching fit the step, or the smallest "
                         "feasible budget is named){}; GRADC_NO_MEMORY_CHECK=1 skips this check",
                         runtime::describeBytes(host->availableBytes), host->source,
                         budgetText(host->availableBytes / ranks), ranks > 1 ? ", or use fewer --devices" : "");
  return Error{message};
}

// The GPU preflight: the rank's arena against the device's free memory.
Status checkDeviceMemory(const runtime::Device& device, const runtime::RankProgram& own) {
  if (const char* skip = std::getenv("GRADC_NO_MEMORY_CHECK"); skip && std::string_view(skip) == "1") return {};
  const std::optional<std::int64_t> free = device.freeBytes();
  if (!free || own.plan.arenaBytes <= *free) return {};
  return Error{fmt::format("the training step needs {} on {} (its memory plan's arena), but the device has {} free; "
                           "compile with a --budget below that (gradc compile SPEC --budget {} -o DIR: recompute and "
                           "micro-batching fit the step, or the smallest feasible budget is named); "
                           "GRADC_NO_MEMORY_CHECK=1 skips this check",
                           runtime::describeBytes(own.plan.arenaBytes), device.name(), runtime::describeBytes(*free),
                           budgetText(*free))};
}

// The flags that contradict each other or name paths that cannot be written, refused before any
// work; says why on stderr.
bool runFlagsHold(const RunFlags& o) {
  if (o.data.empty() == !o.synthetic) {
    std::cerr << "gradc: error: give exactly one of --data FILE and --synthetic\n";
    return false;
  }
  if (o.valData.empty() && (!o.saveBest.empty() || o.evalEvery > 0 || o.evalBatches > 0)) {
    std::cerr << "gradc: error: --save-best, --eval-every and --eval-batches evaluate --val-data: give it too\n";
    return false;
  }
  std::error_code bestError, saveError;
  if (!o.saveBest.empty() && !o.save.empty() &&
      std::filesystem::weakly_canonical(o.saveBest, bestError) == std::filesystem::weakly_canonical(o.save, saveError) &&
      !bestError && !saveError) {
    std::cerr << "gradc: error: --save-best and --save name the same folder; give each its own\n";
    return false;
  }
  // Output paths are checked before any work, not discovered unwritable after training.
  for (const auto& [flag, path] : {std::pair{"--metrics-out", o.metricsOut}, std::pair{"--trace-out", o.traceOut},
                                   std::pair{"--cost-table-out", o.costTableOut}})
    if (!path.empty())
      if (std::string bad = checkOutputPath(flag, path); !bad.empty()) {
        std::cerr << "gradc: error: " << bad << "\n";
        return false;
      }
  return true;
}

// Which step runs: the compiled one, with the generated kernels in the format the device runs
// (the host's shared object, a GPU's PTX), or its reference step, which loads no native code
// (asked for, or when the artifact has no kernels in that format).
runtime::StepVariant chooseStepVariant(const runtime::ArtifactRank& entry, const runtime::Backend& backend,
                                       const RunFlags& o, bool speaks) {
  if (o.noGeneratedKernels) return runtime::StepVariant::reference;
  if (entry.kernelsFile.empty() || !entry.kernelsFileIn(backend.kernelFormat()).empty())
    return runtime::StepVariant::compiled;
  // Every artifact with generated kernels has a reference step.
  if (speaks)
    std::cerr << "gradc: note: " << backend.name << " runs the artifact's reference step (its fused regions as "
              << "ATen kernels): "
              << (backend.kernelFormat() == ir::KernelFormat::none
                      ? "it runs no generated kernels\n"
                      : "the artifact has no generated kernels for it (gradc compile SPEC -o DIR writes them)\n");
  return runtime::StepVariant::reference;
}

// Kernel workspaces were planned for one device kind's kernels: says when another's differ.
void noteForeignWorkspaces(const ir::Graph& graph, const runtime::Backend& backend) {
  const ir::KernelTarget& planned = graph.kernelTarget();
  if (backend.target == &planned) return;
  const ir::KernelSetting plannedSetting = graph.kernelSetting();
  std::int64_t differing = 0;
  for (const auto& n : graph.nodes())
    differing += n->workspaceBytes(plannedSetting) != n->workspaceBytes({plannedSetting.threads, backend.target});
  if (differing > 0)
    std::cerr << "gradc: note: the plan's kernel workspaces were sized for " << planned.name() << "'s kernels, and "
              << differing << " node(s) allocate differently on " << backend.name
              << " (their planned workspace is not theirs here); recompile with gradc compile --device "
              << backend.name << " for a plan of this device\n";
}

// What the run prints before its first step: the plan's summaries, the device and the kernels.
void printRunHeader(const nlohmann::json& flags, runtime::StepVariant variant, const runtime::Device& device,
                    int kernelThreads) {
  for (const char* key : {"summary", "batch_summary", "parallel_summary"})
    if (std::optional<std::string> line = flagText(flags, {key})) std::cerr << *line << "\n";
  if (variant == runtime::StepVariant::reference)
    if (std::optional<std::string> line = flagText(flags, {"reference", "summary"})) std::cerr << *line << "\n";
  const runtime::BlasInfo blas = runtime::blasInfo();
  if (!device.isHost())
    std::cerr << "device: " << device.name() << " (arena in device memory; the libraries hold "
              << device.libraryBytes() << " bytes beside it)\n";
  std::cerr << "kernels: " << kernelThreads << " intra-op thread" << (kernelThreads == 1 ? "" : "s") << ", BLAS "
            << blas.library << (blas.core.empty() ? "" : " core " + blas.core) << " (" << blas.source << ")"
            << (runtime::largeProductsOnTiles() ? "; large f32 products on the tile kernels (AVX-512)" : "") << "\n";
}

// The trainer's options from the flags, the manifest and the loaded rank; nullopt after saying
// why on stderr (a user error).
std::optional<runtime::TrainerOptions> trainerOptions(const std::filesystem::path& dir, const RunFlags& o,
                                                      const runtime::ArtifactManifest& manifest,
                                                      const runtime::RankProgram& program, const nlohmann::json& flags,
                                                      const runtime::Device& device, bool quiet) {
  runtime::TrainerOptions t;
  t.model = manifest.model;
  t.steps = o.steps;
  t.seed = o.seed ? *o.seed : manifest.seed;
  if (!o.data.empty()) t.data = o.data;
  t.vocabulary = o.vocab == "chars" ? runtime::VocabularyKind::characters : runtime::VocabularyKind::bytes;
  if (o.vocabSize > 0) t.tokenVocabulary = o.vocabSize;
  t.randomWindows = o.sampling == "random";
  if (!o.save.empty()) t.saveDir = o.save;
  t.saveEvery = o.saveEvery;
  if (!o.resume.empty()) t.resumeDir = o.resume;
  if (!o.initFrom.empty()) t.initFrom = o.initFrom;
  t.progress = !quiet;
  t.device = &device;
  t.profile = o.profile;
  if (!o.costTableOut.empty()) {
    if (!o.profile) {
      std::cerr << "gradc: error: --cost-table-out fits the kernel times --profile measures: give --profile too\n";
      return std::nullopt;
    }
    if (o.resume.empty() && o.steps < 2) {
      std::cerr << "gradc: error: --cost-table-out: the first step of a run is not timed: train 2 steps or more\n";
      return std::nullopt;
    }
    t.costTableOut = o.costTableOut;
  }
  t.trace = !o.traceOut.empty();
  // Off the host the device's libraries hold memory beside the arena for the whole run: the
  // prediction is the plan's peak plus what they hold, which its reserve should cover.
  const std::int64_t libraryBytes = device.libraryBytes();
  t.plannedPeakBytes = program.plan.peakBytes + libraryBytes;
  if (libraryBytes > program.plan.reserveBytes && program.plan.budgetBytes && !quiet)
    std::cerr << "note: " << device.name() << "'s libraries hold " << libraryBytes << " bytes beside the plan, "
              << (program.plan.reserveBytes > 0 ? "more than the " + std::to_string(program.plan.reserveBytes) +
                                                      " it reserves"
                                                : std::string("which reserves none"))
              << ": the step can exceed its budget by " << libraryBytes - program.plan.reserveBytes
              << " bytes (compile with --device-reserve cuda, or a size)\n";
  t.arenaPlan = program.plan;
  if (!o.valData.empty()) {
    if (!program.evaluation) {
      const std::string why =
          flagText(flags, {"evaluation", "unavailable"}).value_or("it was compiled before gradc had one");
      std::cerr << "gradc: error: --val-data: the artifact " << dir.string() << " has no evaluation step (" << why
                << ")\n";
      return std::nullopt;
    }
    t.evaluation = &*program.evaluation;
    t.validation = runtime::ValidationOptions{o.valData, o.evalEvery, o.evalBatches,
                                              o.saveBest.empty() ? std::nullopt
                                                                 : std::optional<std::filesystem::path>(o.saveBest)};
    if (std::optional<std::string> line = flagText(flags, {"evaluation", "summary"}); line && !quiet)
      std::cerr << *line << "\n";
  }
  t.kernels = program.kernels;
  t.config = manifest.configJson;
  return t;
}

// Rank 0's account of the run (measured against planned peaks, allocations beside the arena)
// and its metrics and trace files; the exit code.
int reportRun(const runtime::TrainResult& result, const runtime::RankProgram& program, std::int64_t libraryBytes,
              const RunFlags& o, int world, bool quiet, int code) {
  const runtime::RunMetrics& m = result.metrics;
  if (!m.steps.empty() && !quiet && code == kExitOk)
    std::cerr << "trained " << m.model << " to step " << m.steps.back().step << ": loss " << m.steps.front().loss
              << " -> " << m.steps.back().loss << "; peak memory " << m.ranks.front().peakBytesMeasured
              << " bytes measured, " << program.plan.peakBytes + libraryBytes << " planned"
              << (libraryBytes > 0 ? " (the plan's " + std::to_string(program.plan.peakBytes) + " + the libraries')" : "")
              << (result.arena ? " (arena execution)" : " (reference counting: GRADC_NO_ARENA)") << "\n";
  if (!quiet && code == kExitOk && !m.ranks.empty() && m.ranks.front().evalPeakBytesMeasured)
    std::cerr << "validation: peak memory " << *m.ranks.front().evalPeakBytesMeasured << " bytes measured, "
              << *m.ranks.front().evalPeakBytesPlanned << " planned (the evaluation step inside the step's arena)\n";
  if (!quiet)
    for (const runtime::RankMetrics& r : m.ranks) {
      const std::string who = world > 1 ? "rank " + std::to_string(r.rank) + ": " : "";
      if (r.peakStep && r.peakBytesPlanned && r.peakBytesMeasured > *r.peakBytesPlanned)
        std::cerr << "note: " << who << "the measured peak is at step " << r.peakStep->step << " ('" << r.peakStep->op
                  << "' of " << (r.peakStep->name.empty() ? "the graph" : r.peakStep->name)
                  << "), whose kernel allocated " << r.peakStep->bytes
                  << " bytes beside the arena; its planned workspace " << r.peakStep->workspace << "\n";
    }
  if (!quiet)
    for (const runtime::RankMetrics& r : m.ranks)
      for (const runtime::BeyondPlan& b : r.beyondPlan)
        std::cerr << "note: " << (world > 1 ? "rank " + std::to_string(r.rank) + ": " : "") << "step " << b.step
                  << " ('" << b.op << "' of " << (b.name.empty() ? "the graph" : b.name) << ") allocated " << b.bytes
                  << " bytes beside the arena, its planned workspace " << b.workspace << "\n";
  if (!o.metricsOut.empty())
    if (Status s = runtime::writeMetrics(o.metricsOut, m); !s) {
      std::cerr << "gradc: error: " << s.message() << "\n";
      return kExitInternal;
    }
  if (!o.traceOut.empty())
    if (Status s = runtime::writeFileAtomic(o.traceOut, result.trace); !s) {
      std::cerr << "gradc: error: " << s.message() << "\n";
      return kExitInternal;
    }
  return code;
}

// A warmup longer than the run never reaches the learning rate asked for: said, not refused.
void warnWarmupBeyondRun(const runtime::ArtifactManifest& manifest, std::int64_t steps) {
  const nlohmann::json config = runtime::parseJsonBounded(manifest.configJson);
  if (config.is_object() && config.contains("warmup_steps") && config["warmup_steps"].is_number_integer() &&
      config["warmup_steps"].get<std::int64_t>() > steps)
    std::cerr << "gradc: warning: the learning-rate warmup (--warmup-steps " << config["warmup_steps"].get<std::int64_t>()
              << ") is longer than the run (--steps " << steps << "): the learning rate never reaches --lr\n";
}

// Every parameter's element type is one `device` can train; the error names the parameter.
Status checkTrainable(const ir::Graph& graph, const runtime::Device& device) {
  for (const auto& p : graph.params())
    if (Status s = device.canTrain(p->type().dtype); !s)
      return Error{s.message() + " (parameter '" + p->name() + "' is " + ir::toString(p->type()) + ")"};
  return {};
}

// The launcher: one worker per rank runs this artifact with the same flags on `backend`,
// supervised until they all end; their exit code.
int launchWorkersOf(const std::filesystem::path& dir, const RunFlags& o, const runtime::Backend& backend, int world,
                    const std::vector<std::string>& workerCommand, std::chrono::milliseconds timeout) {
  RunFlags workerFlags = o;
  workerFlags.device = std::string(backend.name);
  runtime::LaunchOptions launch;
  launch.devices = world;
  launch.argv = workerCommand;
  launch.argv.push_back(dir.string());
  for (std::string& a : workerFlags.toArgs()) launch.argv.push_back(std::move(a));
  launch.timeout = timeout;
  return runtime::launchWorkers(launch);
}

// This worker's communicator, after the rendezvous with the others; the error names the rank.
Expected<std::unique_ptr<runtime::Communicator>> joinRun(const runtime::Backend& backend, const runtime::DistEnv& env,
                                                         std::chrono::milliseconds timeout) {
  // c10d's store client fails on a thread of its own (a peer resetting the connection): named.
  setFailureContext("rank " + std::to_string(env.rank) + ": the connection to the rendezvous store at " +
                    env.masterAddr + ":" + std::to_string(env.masterPort));
  Expected<std::unique_ptr<runtime::Communicator>> c = backend.communicator(env, env.localRank, timeout);
  if (!c && c.error().message.rfind("rank ", 0) != 0)
    return Error{"rank " + std::to_string(env.rank) + ": " + c.error().message};
  return c;
}

}  // namespace

int runArtifact(const std::filesystem::path& dir, const RunFlags& o, const std::vector<std::string>& workerCommand) {
  runtime::setLibraryLogging(o.verbose);
  if (!runFlagsHold(o)) return kExitUserError;
  Expected<runtime::ArtifactManifest> manifest = runtime::loadArtifact(dir);
  if (!manifest) {
    std::cerr << "gradc: error: " << manifest.error().message << "\n";
    return kExitUserError;
  }
  if (!o.quiet) warnWarmupBeyondRun(*manifest, o.steps);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeoutS * 1000));
  Expected<std::optional<runtime::DistEnv>> env = runtime::distEnvFromEnvironment();
  if (!env) {
    std::cerr << "gradc: error: " << env.error().message << "\n";
    return kExitUserError;
  }
  const int world = manifest->world();
  if (*env && (*env)->worldSize != world) {
    std::cerr << "gradc: error: the artifact " << dir.string() << " was compiled for " << world << " rank"
              << (world == 1 ? "" : "s") << " (--devices " << world << "), but WORLD_SIZE=" << (*env)->worldSize
              << "\n";
    return kExitUserError;
  }
  const int rank = *env ? (*env)->rank : 0;
  const int localRank = *env ? (*env)->localRank : 0;
  // The device, decided before anything is loaded or allocated: a launcher (no rank environment)
  // decides for all its workers (each then takes GPU LOCAL_RANK), a worker for itself.
  Expected<const runtime::Backend*> chosen = chooseBackend(o, *env ? localRank + 1 : world);
  if (!chosen) {
    std::cerr << "gradc: error: " << chosen.error().message << "\n";
    return kExitUserError;
  }
  const runtime::Backend* backend = *chosen;
  const runtime::ArtifactRank& entry = manifest->ranks[static_cast<size_t>(rank)];
  const runtime::StepVariant variant = chooseStepVariant(entry, *backend, o, !o.quiet && localRank == 0);
  Expected<runtime::RankProgram> program = runtime::loadRankProgram(dir, *manifest, rank, o.trustKernels, variant, *backend);
  if (!program) {
    std::cerr << "gradc: error: " << program.error().message << "\n";
    return exitCodeFor(program.error());
  }
  if (rank == 0 && !o.quiet) noteForeignWorkspaces(program->graph, *backend);
  // A step with collectives needs a communicator, even for a world of one (--one-rank-collectives):
  // a launcher then hosts the rendezvous for its one worker.
  bool collectives = false;
  for (const auto& n : program->graph.nodes()) collectives |= n->op().issuesCollective;
  const bool launching = !*env && (world > 1 || collectives);
  const runtime::Device* device = &runtime::cpuDevice();
  if (!launching) {
    Expected<const runtime::Device*> d = backend->device(localRank);
    if (!d) {
      std::cerr << "gradc: error: " << d.error().message << "\n";
      return kExitUserError;
    }
    device = *d;
  }
  // Element types the device cannot train are refused before anything runs (a launcher for GPU
  // workers holds no GPU device: each worker checks on its own).
  if (backend->host || !launching)
    if (Status s = checkTrainable(program->graph, *device); !s) {
      std::cerr << "gradc: error: " << s.message() << "\n";
      return kExitUserError;
    }
  // Nothing is allocated before the plan is known to fit: the arenas of the ranks this process
  // starts (all of them for a local launch; its own under torchrun or Slurm) against what the
  // host can still give.
  // On a GPU, the rank's arena against the GPU's free memory (each worker checks its own).
  if (Status s = backend->memoryCheck == runtime::MemoryCheck::device
                     ? checkDeviceMemory(*device, *program)
                     : checkHostMemory(dir, *manifest, *program, launching, variant);
      !s) {
    std::cerr << "gradc: error: " << s.message() << "\n";
    return kExitUserError;
  }
  // N workers run this artifact, supervised until they all end, on the device decided here.
  if (launching) return launchWorkersOf(dir, o, *backend, world, workerCommand, timeout);

  const bool quiet = o.quiet || rank != 0;
  nlohmann::json flags = runtime::parseJsonBounded(manifest->flagsJson);
  if (!quiet) printRunHeader(flags, variant, *device, manifest->kernelThreads);
  // The plan's per-thread workspace was sized for this many intra-op threads.
  at::set_num_threads(manifest->kernelThreads);

  std::unique_ptr<runtime::Communicator> comm;
  if (world > 1 || collectives) {
    Expected<std::unique_ptr<runtime::Communicator>> c = joinRun(*backend, **env, timeout);
    if (!c) {
      std::cerr << "gradc: error: " << c.error().message << "\n";
      return kExitUserError;
    }
    comm = std::move(*c);
  }

  std::optional<runtime::TrainerOptions> t = trainerOptions(dir, o, *manifest, *program, flags, *device, quiet);
  if (!t) return kExitUserError;
  t->comm = comm.get();
  t->referenceStep = variant == runtime::StepVariant::reference;
  Expected<runtime::TrainResult> result = runtime::train(program->graph, *t);
  if (!result) {
    const std::string& message = result.error().message;
    const bool named = message.rfind("rank ", 0) == 0;
    std::cerr << "gradc: error: " << (world > 1 && !named ? "rank " + std::to_string(rank) + ": " : "") << message
              << "\n";
    // An allocation or a write (a checkpoint's) that failed mid-run for the environment's reasons
    // is exit 1; a --save location that cannot work is refused before step 1 (exit 2).
    return exitCodeFor(result.error());
  }
  if (!result->failure.empty() && rank == 0)
    std::cerr << "gradc: error: " << (world > 1 ? "rank 0: " : "") << result->failure << "\n";
  const int code = result->failure.empty() ? kExitOk : kExitUserError;
  if (rank != 0) return code;  // rank 0 reports and writes the metrics of every rank
  return reportRun(*result, *program, device->libraryBytes(), o, world, quiet, code);
}

}  // namespace gradc::tools
