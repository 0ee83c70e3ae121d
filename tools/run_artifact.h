// Running a compiled artifact: `gradc train DIR` and `gradc-run DIR`. Needs only the runtime
// and ir/ (no frontend, no passes, no yaml-cpp, no LLVM), so it is also the whole of gradc-run,
// the binary that goes to machines that only train.
//
// A multi-rank artifact started without a rank environment launches one worker per rank (the
// same program with `workerCommand` + the artifact + the run flags); a worker, or a process
// started by torchrun or Slurm, loads its rank's graph and plan, joins the others over Gloo and
// trains. Every rank runs with the intra-op threads the plan was made for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ir/status.h"

namespace gradc::runtime {
struct Backend;  // runtime/backends/backends.h
}

namespace gradc::tools {

// The flags that only say how to run a step, never what the step is.
struct RunFlags {
  std::string data;
  bool synthetic = false;
  std::string vocab = "bytes";
  std::int64_t vocabSize = 0;        // --vocab-size: --data is a token file of ids in [0, N); 0: not given
  std::string sampling = "epoch";    // --sampling epoch|random
  std::int64_t steps = 100;
  std::optional<std::uint64_t> seed;
  std::string save;
  std::int64_t saveEvery = 0;
  std::string resume;
  std::string initFrom;  // --init-from: a weights file or checkpoint folder (fine-tuning)
  std::string metricsOut;
  std::string traceOut;  // Chrome trace-event file of the run (runtime/train/trace.h)
  // Validation while training (runtime/train/evaluation.h).
  std::string valData;
  std::int64_t evalEvery = 0;
  std::int64_t evalBatches = 0;
  std::string saveBest;
  bool quiet = false;
  bool profile = false;
  std::string costTableOut;  // --cost-table-out FILE ("" none)
  bool verbose = false;       // the libraries' own log lines too (runtime/comm/library_logging.h)
  bool trustKernels = false;  // load an artifact's native kernels without the user's tag (runtime/io/kernel_trust.h)
  bool noGeneratedKernels = false;  // run the artifact's reference step: no native kernels at all
  double timeoutS = 300;
  std::string device = "auto";  // a backend (cpu, cuda, reference) or auto (runtime/backends/device_select.h)

  void addTo(CLI::App& cmd);
  // The same flags as arguments, for a worker's command line.
  std::vector<std::string> toArgs() const;
};

// Trains the artifact in `dir`. `workerCommand`: the program and subcommand that runs an
// artifact ({"/path/gradc", "train"}, {"/path/gradc-run"}). Returns the exit code.
int runArtifact(const std::filesystem::path& dir, const RunFlags& flags, const std::vector<std::string>& workerCommand);

// The running executable's path (for worker command lines).
std::string ownExecutable();

// The backend a run with these flags puts local ranks [0, localRanks) on
// (runtime/backends/device_select.h), or an Error saying why the requested device cannot be used.
// Touches no device.
Expected<const runtime::Backend*> chooseBackend(const RunFlags& flags, int localRanks);

}  // namespace gradc::tools
