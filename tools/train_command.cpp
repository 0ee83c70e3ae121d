// gradc train SPEC|ARTIFACT [--set k=v]... [--data FILE | --synthetic] [--steps N] [optimizer flags]
//   [--seed N] [--save DIR] [--save-every N] [--resume DIR] [--metrics-out FILE.json]
//   [--budget B] [--remat S] [--micro-batches K] [--loss-chunks K|auto|off] [--devices N [--loss-placement local|gather] [--bucket-mib M]]
//   [--device cpu|cuda|auto]
//
// One path: a spec is compiled into a temporary artifact (tools/artifact_build.h), then the
// artifact runs (tools/run_artifact.h) -- with --devices N, as N worker processes that each
// load it, none recompiling. An artifact folder runs as it is; a flag that would change its
// graph is refused, naming the flag. A spec trained on GPUs (--device cuda, or auto with GPUs
// visible) is compiled without elementwise fusion, whose generated kernels run on the CPU only.
#include <stdlib.h>

#include <cstddef>
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

#include "runtime/artifact.h"
#include "runtime/dist_env.h"
#include "tools/artifact_build.h"
#include "tools/commands.h"
#include "tools/run_artifact.h"

namespace gradc::tools {

namespace {

struct TrainCommandOptions {
  ArtifactRequest compile;
  RunFlags run;
  std::vector<CLI::Option*> graphFlags;  // options that shape the graph
};

// A folder made with mkdtemp, removed with everything in it when the run ends.
class TemporaryFolder {
 public:
  static Expected<TemporaryFolder> create() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "gradc-artifact-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return Error{"cannot create a temporary folder in " + base.string()};
    return TemporaryFolder(pattern);
  }
  TemporaryFolder(TemporaryFolder&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TemporaryFolder& operator=(TemporaryFolder&&) = delete;
  ~TemporaryFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TemporaryFolder(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

int runTrain(const TrainCommandOptions& o) {
  const std::vector<std::string> workerCommand{ownExecutable(), "train"};
  std::error_code ec;
  if (std::filesystem::is_directory(o.compile.spec, ec)) {
    for (const CLI::Option* flag : o.graphFlags)
      if (flag->count() > 0) {
        std::cerr << "gradc: error: " << flag->get_name() << " changes the training graph, which the artifact "
                  << o.compile.spec << " already fixes; recompile it (gradc compile SPEC " << flag->get_name()
                  << " ... -o DIR) or leave the flag out\n";
        return kExitUserError;
      }
    return runArtifact(o.compile.spec, o.run, workerCommand);
  }
  // Each worker of torchrun or Slurm compiles for itself. The run prints the plan's summary.
  ArtifactRequest request = o.compile;
  request.quiet = true;
  Expected<std::optional<runtime::DistEnv>> env = runtime::distEnvFromEnvironment();
  if (!env) {
    std::cerr << "gradc: error: " << env.error().message << "\n";
    return kExitUserError;
  }
  if (*env) {  // started by a launcher: the world is the environment's
    if (request.parallel.devices > 1 && request.parallel.devices != (*env)->worldSize) {
      std::cerr << "gradc: error: --devices " << request.parallel.devices << " disagrees with WORLD_SIZE="
                << (*env)->worldSize << "\n";
      return kExitUserError;
    }
    request.parallel.devices = (*env)->worldSize;
  }
  if (o.run.data.empty() == !o.run.synthetic) {
    std::cerr << "gradc: error: give exactly one of --data FILE and --synthetic\n";
    return kExitUserError;
  }
  // On GPUs the step runs without generated CPU kernels: its elementwise ops are ATen's.
  Expected<bool> cuda = runsOnCuda(o.run, *env ? (*env)->localRank + 1 : request.parallel.devices);
  if (!cuda) {
    std::cerr << "gradc: error: " << cuda.error().message << "\n";
    return kExitUserError;
  }
  if (*cuda) request.memory.noFuse = true;
  Expected<TemporaryFolder> folder = TemporaryFolder::create();
  if (!folder) {
    std::cerr << "gradc: error: " << folder.error().message << "\n";
    return kExitInternal;
  }
  const std::filesystem::path artifact = folder->path() / "artifact";
  if (int code = buildArtifact(request, artifact); code != kExitOk) return code;
  return runArtifact(artifact, o.run, workerCommand);
}

}  // namespace

Runner addTrainCommand(CLI::App& cmd) {
  auto o = std::make_shared<TrainCommandOptions>();
  cmd.add_option("spec", o->compile.spec,
                 "The YAML model spec, or a compiled artifact folder (gradc compile SPEC ... -o DIR)")
      ->required();
  const size_t firstGraphFlag = cmd.get_options().size();
  cmd.add_option("--set", o->compile.sets, "Override a dim (or seed): --set batch=64 (repeatable)");
  o->compile.optimizer.addTo(cmd);
  o->compile.memory.addTo(cmd);
  o->compile.parallel.addTo(cmd);
  const std::vector<CLI::Option*> all = cmd.get_options();
  o->graphFlags.assign(all.begin() + static_cast<std::ptrdiff_t>(firstGraphFlag), all.end());
  o->run.addTo(cmd);
  return [o] { return runTrain(*o); };
}

}  // namespace gradc::tools
