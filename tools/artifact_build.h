// Compiling a spec into an artifact (runtime/io/artifact.h): `gradc compile SPEC ... -o DIR`, and
// `gradc train SPEC`, which compiles into a temporary artifact and runs that.
//
// Every rank's step is compiled (ranks differ: their shard of the dropout masks, the loss
// placement's roles) and each distinct graph is written once, as rankR.gir (step.gir for one
// device) with its memory plan. Each is the scheduled training step of tools/training_step.h;
// the plan's per-thread workspace is sized for the threads the ranks will run with
// (kernelThreadsFor), which the manifest records. A graph with fused nodes also gets its generated
// kernels: rankR.kernels.so (codegen/, loaded by the runtime with dlopen) and, for gradc compile,
// rankR.kernels.ptx.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tools/training_step.h"

namespace gradc::tools {

struct ArtifactRequest {
  std::string spec;
  std::vector<std::string> sets;
  OptimizerFlags optimizer;
  MemoryFlags memory;
  ParallelFlags parallel;
  bool quiet = false;  // no summary line on stderr
  passes::PassManagerOptions passManager;  // --print-after-all, --dump-dir (per rank: DIR/rankR)
  bool withPtx = false;  // also the fused kernels as PTX (gradc compile -o; train runs on the CPU)
};

// Writes the artifact to `out`; errors are printed. Returns the exit code.
int buildArtifact(const ArtifactRequest& request, const std::filesystem::path& out);

}  // namespace gradc::tools
