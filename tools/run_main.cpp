// gradc-run: trains a compiled artifact (gradc compile SPEC ... -o DIR) with nothing of the
// compiler linked in: the runtime, ir/ and LibTorch only. The binary for machines that train.
#include <CLI/CLI.hpp>

#include "runtime/comm/library_logging.h"
#include "runtime/backends/kernel_targets.h"
#include "runtime/io/artifact.h"
#include "runtime/kernels/blas_kernels.h"
#include "tools/commands.h"
#include "tools/failure_guard.h"
#include "tools/flag_checks.h"
#include "tools/run_artifact.h"

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  using namespace gradc::tools;
  gradc::runtime::selectBlasKernels(argv);  // may re-execute once with better BLAS kernels
  gradc::runtime::setLibraryLogging(/*verbose=*/false);  // train --verbose turns them back on
  CLI::App app{"gradc-run: train a compiled gradc artifact (no compiler needed)"};
  app.set_version_flag("--version", std::string("gradc-run ") + gradc::runtime::kGradcVersion);
  useErrorFormat(app, "gradc-run");
  std::string artifact;
  app.add_option("artifact", artifact, "The artifact folder (gradc compile SPEC ... -o DIR)")->required();
  RunFlags flags;
  flags.addTo(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUserError;
  }
  return runGuarded("gradc-run", [&] { return runArtifact(artifact, flags, {ownExecutable()}); });
}
