// The compiled artifact: what `gradc compile SPEC ... -o DIR` writes and `gradc train DIR` /
// `gradc-run DIR` execute, with no frontend and no passes in between.
//
// Layout (docs/artifact.md):
//   DIR/manifest.json   format + version, gradc version, the spec's name, path and sha256, every
//                       dim, every flag that shaped the graph, the kernel threads it was planned
//                       for, the training configuration, the ranks and which files each runs,
//                       the sha256 of every other file, and its own checksum
//   DIR/<graph>.gir     one scheduled training-step graph per distinct rank graph, IR text
//                       (`gradc opt` parses and reprints it byte for byte)
//   DIR/<graph>.plan.json  its memory plan (the `--emit plan` dump), every buffer's offset
//   DIR/<graph>.kernels.so   its fused regions' generated CPU kernels (codegen/), when it has any
//   DIR/<graph>.kernels.ptx  the same kernels as PTX for sm_70 and newer (written by gradc compile -o)
//   DIR/<graph>.eval.gir, .eval.plan.json  the evaluation step (validation while training) and its
//                       plan inside the training step's arena, when the model has one
//   DIR/<graph>.reference.gir, .reference.plan.json  the reference step, when the graph runs
//                       generated kernels: the same step with every fused region as its ops'
//                       ATen kernels (passes/unfuse.h), planned on its own; what runs without
//                       the native kernels (--no-generated-kernels) and on GPUs
//
// Integrity. The manifest's "checksum" is the sha256 of manifest.json with the checksum's own
// 64 digits written as zeros; every other file's sha256 is in "files". loadArtifact checks all
// of them, so one changed byte anywhere is an Error naming the file; so is a missing file, an
// unknown format or a version this runtime does not read.
//
// Writing is atomic: the artifact is built in a sibling folder and renamed into place. An
// existing DIR is replaced only when it is itself a gradc artifact; anything else is left alone
// and the write fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "ir/status.h"
#include "runtime/backends/backends.h"
#include "runtime/kernels/generated_kernels.h"

namespace gradc::runtime {

inline constexpr const char* kArtifactFormat = "gradc-artifact";
// 2: the manifest records the ranks' device mesh, rank graphs their collectives' groups, every
// graph its kernel_threads, every rank with generated kernels its reference step.
inline constexpr int kArtifactVersion = 2;
inline constexpr const char* kGradcVersion = "0.1.0";

struct ArtifactRank {
  int rank = 0;
  std::string graphFile;  // relative to the artifact folder
  std::string planFile;
  // The graph's generated kernels (codegen/): a CPU shared object and PTX text; "" when the
  // graph has no fused nodes (or, for PTX, when it was not generated).
  std::string kernelsFile;
  std::string ptxFile;
  // HMAC of the kernels and the graph under the compiling user's key (runtime/io/kernel_trust.h);
  // "" when there are no kernels or no key could be had.
  std::string kernelsTag;
  // The evaluation step (tools/evaluation_step.h): its graph and its plan inside this rank's
  // arena, run `evalSplits` times per rank batch; "" when the artifact has none.
  std::string evalGraphFile;
  std::string evalPlanFile;
  int evalSplits = 1;
  // The reference step (passes/unfuse.h) and its plan; "" when the graph runs no generated
  // kernels (it is its own reference then).
  std::string referenceGraphFile;
  std::string referencePlanFile;
  // The PTX's tag, as kernelsTag is the shared object's: HMAC of the PTX and the graph.
  std::string ptxTag;

  // The file of the generated kernels in that format ("" when the artifact has none), and its tag.
  const std::string& kernelsFileIn(GeneratedKernelFormat format) const {
    return format == GeneratedKernelFormat::ptx ? ptxFile : format == GeneratedKernelFormat::none ? none_ : kernelsFile;
  }
  const std::string& kernelsTagIn(GeneratedKernelFormat format) const {
    return format == GeneratedKernelFormat::ptx ? ptxTag : format == GeneratedKernelFormat::none ? none_ : kernelsTag;
  }

  static inline const std::string none_;  // a backend that runs no generated kernels has none
};

struct ArtifactManifest {
  std::string model;
  std::string specPath;
  std::string specSha256;
  std::vector<std::pair<std::string, std::int64_t>> dims;
  std::string flagsJson = "{}";   // JSON object: every flag that shaped the graph, as given
  std::string configJson = "{}";  // JSON object stored in checkpoints (optimizer settings, ...)
  std::uint64_t seed = 0;         // the spec's seed (a run may override it)
  int kernelThreads = 1;          // intra-op threads the plan's workspace was sized for
  std::string mesh;               // the device mesh of the ranks (ir/device_mesh.h): "dp=N"
  std::vector<ArtifactRank> ranks;
  std::string gradcVersion = kGradcVersion;

  int world() const { return static_cast<int>(ranks.size()); }
};

struct ArtifactFile {
  std::string name;  // a plain file name: no folders
  std::string contents;
};

// Writes `files` and the manifest (which must name only those files) as DIR, atomically.
Status writeArtifact(const std::filesystem::path& dir, const ArtifactManifest& manifest,
                     const std::vector<ArtifactFile>& files);

// Reads and verifies DIR's manifest and the checksum of every file it lists.
Expected<ArtifactManifest> loadArtifact(const std::filesystem::path& dir);

// True when `dir` holds a manifest.json of a gradc artifact (verified or not): what a CLI uses
// to tell an artifact folder from a spec, and what may be replaced by writeArtifact.
bool looksLikeArtifact(const std::filesystem::path& dir);

struct EvaluationProgram {
  ir::Graph graph;  // scheduled; output "loss"
  ir::MemoryPlan plan;   // inside the training step's arena (passes/evaluation_plan.h)
  int splits = 1;   // runs per rank batch
};

struct RankProgram {
  ir::Graph graph;  // scheduled
  ir::MemoryPlan plan;
  std::shared_ptr<const GeneratedKernels> kernels;  // loaded when the graph has fused nodes
  std::optional<EvaluationProgram> evaluation;      // when the artifact has an evaluation step
};

// Which step of a rank runs: the compiled one, whose fused regions and one-pass updates run the
// artifact's generated kernels, or its reference step, which runs ATen kernels only (the
// compiled step itself when that runs no generated kernels).
enum class StepVariant { compiled, reference };

// The graph and plan of one rank of a loaded artifact, parsed and verified; Errors name the file.
// Its native kernels are loaded only when their tag is the running user's (runtime/io/kernel_trust.h)
// or `trustKernels`; the reference variant loads none. The kernels are those `backend` runs (the
// shared object on the host, the PTX on a GPU), loaded by it.
Expected<RankProgram> loadRankProgram(const std::filesystem::path& dir, const ArtifactManifest& manifest, int rank,
                                      bool trustKernels = false, StepVariant variant = StepVariant::compiled,
                                      const Backend& backend = hostBackend());
// The memory plan of one rank alone (no graph parsed), e.g. to size a launch.
Expected<ir::MemoryPlan> loadRankPlan(const std::filesystem::path& dir, const ArtifactManifest& manifest, int rank,
                                 StepVariant variant = StepVariant::compiled);

}  // namespace gradc::runtime
