#include "runtime/io/artifact.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <system_error>

#include "ir/device_mesh.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/exec/plan_json.h"
#include "runtime/io/atomic_file.h"
#include "runtime/core/json_text.h"
#include "runtime/io/kernel_trust.h"
#include "runtime/io/sha256.h"

namespace gradc::runtime {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kManifest = "manifest.json";
constexpr std::string_view kChecksumKey = "\"checksum\": \"";
const std::string kZeroDigest(64, '0');

// The position of the checksum's 64 digits in a manifest's text, or npos.
size_t checksumDigits(const std::string& text) {
  size_t at = text.rfind(kChecksumKey);
  if (at == std::string::npos || at + kChecksumKey.size() + 64 > text.size()) return std::string::npos;
  return at + kChecksumKey.size();
}

bool plainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos && name != kManifest;
}

Json manifestJson(const ArtifactManifest& m, const std::vector<ArtifactFile>& files) {
  Json j;
  j["format"] = kArtifactFormat;
  j["version"] = kArtifactVersion;
  j["gradc_version"] = m.gradcVersion;
  j["model"] = m.model;
  j["spec"] = {{"path", m.specPath}, {"sha256", m.specSha256}};
  Json dims = Json::object();
  for (const auto& [name, value] : m.dims) dims[name] = value;
  j["dims"] = dims;
  j["flags"] = Json::parse(m.flagsJson);
  j["config"] = Json::parse(m.configJson);
  j["seed"] = m.seed;
  j["kernel_threads"] = m.kernelThreads;
  j["mesh"] = m.mesh;
  Json ranks = Json::array();
  for (const ArtifactRank& r : m.ranks) {
    Json rank = {{"rank", r.rank}, {"graph", r.graphFile}, {"plan", r.planFile}};
    if (!r.kernelsFile.empty()) rank["kernels"] = r.kernelsFile;
    if (!r.ptxFile.empty()) rank["ptx"] = r.ptxFile;
    if (!r.kernelsTag.empty()) rank["kernels_tag"] = r.kernelsTag;
    if (!r.ptxTag.empty()) rank["ptx_tag"] = r.ptxTag;
    if (!r.evalGraphFile.empty())
      rank["eval"] = {{"graph", r.evalGraphFile}, {"plan", r.evalPlanFile}, {"splits", r.evalSplits}};
    if (!r.referenceGraphFile.empty())
      rank["reference"] = {{"graph", r.referenceGraphFile}, {"plan", r.referencePlanFile}};
    ranks.push_back(rank);
  }
  j["ranks"] = ranks;
  Json sums = Json::object();
  for (const ArtifactFile& f : files) sums[f.name] = sha256Hex(f.contents);
  j["files"] = sums;
  j["checksum"] = kZeroDigest;
  return j;
}

Error corrupted(const fs::path& file, const std::string& what) {
  return Error{"artifact file " + file.string() + ": " + what};
}

template <class T>
Expected<T> field(const Json& j, const char* key, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end()) return corrupted(file, std::string("no \"") + key + "\"");
  try {
    return it->get<T>();
  } catch (const std::exception&) {
    return corrupted(file, std::string("\"") + key + "\" has the wrong type");
  }
}

}  // namespace

bool looksLikeArtifact(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
  Expected<std::string> text = readFile(dir / kManifest);
  if (!text || jsonNestingDepth(*text) > kMaxJsonNesting) return false;
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("format", "") == kArtifactFormat;
}

Status writeArtifact(const fs::path& dir, const ArtifactManifest& manifest, const std::vector<ArtifactFile>& files) {
  for (const ArtifactFile& f : files)
    if (!plainName(f.name)) return Error{"artifact file name '" + f.name + "' is not a plain file name"};
  for (const ArtifactRank& r : manifest.ranks)
    for (const std::string* name : {&r.graphFile, &r.planFile, &r.kernelsFile, &r.ptxFile, &r.evalGraphFile,
                                    &r.evalPlanFile, &r.referenceGraphFile, &r.referencePlanFile}) {
      if (name->empty() && name != &r.graphFile && name != &r.planFile) continue;
      bool listed = false;
      for (const ArtifactFile& f : files) listed |= f.name == *name;
      if (!listed) return Error{"the manifest names '" + *name + "', which is not among the artifact's files"};
    }
  std::string text = manifestJson(manifest, files).dump(2) + "\n";
  const size_t digits = checksumDigits(text);
  text.replace(digits, 64, sha256Hex(text));

  std::error_code ec;
  const fs::path target = fs::absolute(dir, ec);
  const fs::path parent = target.parent_path();
  fs::create_directories(parent, ec);
  if (ec) return ioError("cannot create folder", parent, ec.value());
  const bool replacing = fs::exists(fs::symlink_status(target, ec));
  if (replacing && !looksLikeArtifact(target))
    return Error{"'" + dir.string() + "' exists and is not a gradc artifact; not replacing it (choose another "
                 "output folder or remove it)"};
  const std::string stem = target.filename().string();
  const std::string tag = std::to_string(::getpid());
  const fs::path temp = parent / ("." + stem + ".tmp-" + tag);
  const fs::path old = parent / ("." + stem + ".old-" + tag);
  fs::remove_all(temp, ec);  // a stale one of this very name: ours by construction
  if (!fs::create_directory(temp, ec) || ec) return ioError("cannot create folder", temp, ec.value());
  auto fail = [&](Error e) {
    std::error_code ignore;
    fs::remove_all(temp, ignore);
    return e;
  };
  for (const ArtifactFile& f : files)
    if (Status s = writeFileAtomic(temp / f.name, f.contents); !s) return fail(s.error());
  if (Status s = writeFileAtomic(temp / kManifest, text); !s) return fail(s.error());
  if (replacing) {
    fs::rename(target, old, ec);
    if (ec) return fail(ioError("cannot move the previous artifact aside", target, ec.value()));
  }
  fs::rename(temp, target, ec);
  if (ec) {
    Error e = ioError("cannot move the artifact into place", target, ec.value());
    std::error_code ignore;
    if (replacing) fs::rename(old, target, ignore);
    return fail(e);
  }
  if (replacing) fs::remove_all(old, ec);
  return syncDirectory(parent);
}

namespace {
// The ranks of a parsed manifest: 0, 1, ... in order, a reference step for every rank that runs
// generated kernels, and a mesh of as many ranks.
Status checkRanks(const ArtifactManifest& m, const fs::path& file) {
  if (m.ranks.empty()) return corrupted(file, "no ranks");
  for (size_t i = 0; i < m.ranks.size(); ++i)
    if (m.ranks[i].rank != static_cast<int>(i)) return corrupted(file, "ranks are not 0, 1, ... in order");
  for (const ArtifactRank& r : m.ranks)
    if (!r.kernelsFile.empty() && r.referenceGraphFile.empty())
      return corrupted(file, "rank " + std::to_string(r.rank) + " runs generated kernels but has no reference step");
  if (Expected<ir::DeviceMesh> mesh = ir::DeviceMesh::parse(m.mesh); !mesh)
    return corrupted(file, mesh.error().message);
  else if (mesh->ranks() != m.world())
    return corrupted(file, "the mesh " + m.mesh + " has " + std::to_string(mesh->ranks()) + " ranks, the manifest " +
                               std::to_string(m.world()));
  return Status::success();
}
}  // namespace

Expected<ArtifactManifest> loadArtifact(const fs::path& dir) {
  const fs::path file = dir / kManifest;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error{"'" + dir.string() + "' is not a folder (an artifact is a folder)"};
  Expected<std::string> text = readFile(file);
  if (!text) return text.error().withContext("'" + dir.string() + "' is not a gradc artifact: ");
  if (std::string deep = jsonNestingError(*text); !deep.empty()) return corrupted(file, deep);
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupted(file, "not valid JSON (the file was changed or truncated)");
  if (j.value("format", "") != kArtifactFormat) return corrupted(file, "not a gradc artifact manifest");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kArtifactVersion)
    return corrupted(file, "format version " + (j.contains("version") ? j["version"].dump() : std::string("(none)")) +
                               ", but this gradc reads version " + std::to_string(kArtifactVersion) +
                               " only: recompile the spec with this gradc (gradc compile SPEC -o DIR)");
  const size_t digits = checksumDigits(*text);
  if (digits == std::string::npos) return corrupted(file, "no checksum");
  std::string zeroed = *text;
  const std::string recorded = zeroed.substr(digits, 64);
  zeroed.replace(digits, 64, kZeroDigest);
  if (sha256Hex(zeroed) != recorded)
    return corrupted(file, "checksum mismatch: the manifest was changed after gradc wrote it");

  ArtifactManifest m;
  try {
    m.gradcVersion = j.at("gradc_version").get<std::string>();
    m.model = j.at("model").get<std::string>();
    m.specPath = j.at("spec").at("path").get<std::string>();
    m.specSha256 = j.at("spec").at("sha256").get<std::string>();
    for (const auto& [name, value] : j.at("dims").items()) m.dims.emplace_back(name, value.get<std::int64_t>());
    m.flagsJson = j.at("flags").dump();
    m.configJson = j.at("config").dump();
    m.seed = j.at("seed").get<std::uint64_t>();
    m.kernelThreads = j.at("kernel_threads").get<int>();
    m.mesh = j.at("mesh").get<std::string>();
    for (const Json& r : j.at("ranks")) {
      ArtifactRank rank{r.at("rank").get<int>(), r.at("graph").get<std::string>(), r.at("plan").get<std::string>(),
                        r.value("kernels", std::string()), r.value("ptx", std::string()),
                        r.value("kernels_tag", std::string())};
      rank.ptxTag = r.value("ptx_tag", std::string());
      if (r.contains("eval")) {
        const Json& e = r.at("eval");
        rank.evalGraphFile = e.at("graph").get<std::string>();
        rank.evalPlanFile = e.at("plan").get<std::string>();
        rank.evalSplits = e.at("splits").get<int>();
        if (rank.evalGraphFile.empty() || rank.evalPlanFile.empty() || rank.evalSplits < 1)
          return corrupted(file, "rank " + std::to_string(rank.rank) + "'s \"eval\" is malformed");
      }
      if (r.contains("reference")) {
        const Json& e = r.at("reference");
        rank.referenceGraphFile = e.at("graph").get<std::string>();
        rank.referencePlanFile = e.at("plan").get<std::string>();
        if (rank.referenceGraphFile.empty() || rank.referencePlanFile.empty())
          return corrupted(file, "rank " + std::to_string(rank.rank) + "'s \"reference\" is malformed");
      }
      m.ranks.push_back(std::move(rank));
    }
  } catch (const std::exception& e) {
    return corrupted(file, std::string("malformed: ") + e.what());
  }
  if (Status s = checkRanks(m, file); !s) return s.error();
  Expected<Json> files = field<Json>(j, "files", file);
  if (!files || !files->is_object()) return corrupted(file, "\"files\" is not an object");
  for (const auto& [name, digest] : files->items()) {
    if (!plainName(name) || !digest.is_string()) return corrupted(file, "\"files\" lists '" + name + "'");
    Expected<std::string> contents = readFile(dir / name);
    if (!contents) return corrupted(dir / name, contents.error().message);
    if (sha256Hex(*contents) != digest.get<std::string>())
      return corrupted(dir / name, "checksum mismatch: the file was changed after gradc wrote it");
  }
  for (const ArtifactRank& r : m.ranks)
    for (const std::string* name : {&r.graphFile, &r.planFile, &r.kernelsFile, &r.ptxFile, &r.evalGraphFile,
                                    &r.evalPlanFile, &r.referenceGraphFile, &r.referencePlanFile})
      if (!(name->empty() && name != &r.graphFile && name != &r.planFile) && !files->contains(*name)) return corrupted(file, "rank " + std::to_string(r.rank) + "'s file '" + *name +
                                                               "' has no checksum");
  return m;
}

namespace {
// A graph without collectives runs on any mesh; one with them on the manifest's.
bool meshDiffers(const ir::DeviceMesh& graphMesh, const ArtifactManifest& manifest) {
  return graphMesh.ranks() > 1 && graphMesh.toString() != manifest.mesh;
}

Status checkRank(const ArtifactManifest& manifest, int rank) {
  if (rank < 0 || rank >= manifest.world())
    return Error{"rank " + std::to_string(rank) + " is not among the artifact's " + std::to_string(manifest.world()) +
                 " ranks"};
  return Status::success();
}

Expected<ir::MemoryPlan> loadPlanFile(const fs::path& planFile) {
  Expected<std::string> planText = readFile(planFile);
  if (!planText) return corrupted(planFile, planText.error().message);
  Expected<ir::MemoryPlan> plan = planFromJson(*planText);
  if (!plan) return corrupted(planFile, plan.error().message);
  return plan;
}

// A graph file parsed and verified; its text in `text` (the kernels' tag covers it).
Expected<ir::Graph> loadGraphFile(const fs::path& graphFile, std::string& text) {
  Expected<std::string> graphText = readFile(graphFile);
  if (!graphText) return corrupted(graphFile, graphText.error().message);
  Expected<ir::Graph> graph = ir::parseGraph(*graphText, graphFile.string());
  if (!graph) return graph.error();
  if (Status s = ir::verify(*graph); !s) return corrupted(graphFile, s.message());
  text = std::move(*graphText);
  return graph;
}
}  // namespace

namespace {
// The graph and plan files of the variant; an Error when the artifact has no reference step for
// a graph that needs one.
Expected<std::pair<std::string, std::string>> variantFiles(const fs::path& dir, const ArtifactRank& entry,
                                                           StepVariant variant) {
  if (variant == StepVariant::compiled || entry.kernelsFile.empty()) return std::pair{entry.graphFile, entry.planFile};
  return std::pair{entry.referenceGraphFile, entry.referencePlanFile};  // the manifest's check: always there
}
}  // namespace

Expected<ir::MemoryPlan> loadRankPlan(const fs::path& dir, const ArtifactManifest& manifest, int rank, StepVariant variant) {
  if (Status s = checkRank(manifest, rank); !s) return s.error();
  Expected<std::pair<std::string, std::string>> files =
      variantFiles(dir, manifest.ranks[static_cast<size_t>(rank)], variant);
  if (!files) return files.error();
  return loadPlanFile(dir / files->second);
}

Expected<RankProgram> loadRankProgram(const fs::path& dir, const ArtifactManifest& manifest, int rank,
                                      bool trustKernels, StepVariant variant, const Backend& backend) {
  if (Status s = checkRank(manifest, rank); !s) return s.error();
  const ArtifactRank& entry = manifest.ranks[static_cast<size_t>(rank)];
  Expected<std::pair<std::string, std::string>> files = variantFiles(dir, entry, variant);
  if (!files) return files.error();
  const fs::path graphFile = dir / files->first;
  std::string graphText;
  Expected<ir::Graph> graph = loadGraphFile(graphFile, graphText);
  if (!graph) return graph.error();
  if (variant == StepVariant::reference && needsGeneratedKernels(*graph))
    return corrupted(graphFile, "the reference step runs generated kernels, which it never has");
  // The plan's workspaces were sized for the graph's kernel_threads, and the runtime runs with
  // the manifest's count.
  if (!ir::getInt(graph->attrs(), "kernel_threads"))
    return corrupted(graphFile, "it does not record the intra-op threads its plan was made for (kernel_threads)");
  if (graph->kernelThreads() != manifest.kernelThreads) {
    auto threads = [](int n) { return std::to_string(n) + " intra-op thread" + (n == 1 ? "" : "s"); };
    return corrupted(graphFile, "its plan was made for " + threads(graph->kernelThreads()) + ", but the manifest runs " +
                                    threads(manifest.kernelThreads));
  }
  // Its collectives span the axes of the manifest's mesh (the verifier checked them against the
  // graph's own).
  if (Expected<ir::DeviceMesh> mesh = ir::meshOf(*graph); mesh && meshDiffers(*mesh, manifest))
    return corrupted(graphFile, "its collectives run on the mesh " + mesh->toString() + ", the manifest's is " +
                                    manifest.mesh);
  Expected<ir::MemoryPlan> plan = loadPlanFile(dir / files->second);
  if (!plan) return plan.error();
  RankProgram program{std::move(*graph), std::move(*plan), nullptr, std::nullopt};
  if (!entry.evalGraphFile.empty()) {
    std::string evalText;
    Expected<ir::Graph> evalGraph = loadGraphFile(dir / entry.evalGraphFile, evalText);
    if (!evalGraph) return evalGraph.error();
    if (needsGeneratedKernels(*evalGraph))
      return corrupted(dir / entry.evalGraphFile, "the evaluation step runs generated kernels, which it never has");
    Expected<ir::MemoryPlan> evalPlan = loadPlanFile(dir / entry.evalPlanFile);
    if (!evalPlan) return evalPlan.error();
    program.evaluation = EvaluationProgram{std::move(*evalGraph), std::move(*evalPlan), entry.evalSplits};
  }
  if (needsGeneratedKernels(program.graph)) {
    const std::string& kernels = entry.kernelsFileIn(backend.kernelFormat());
    if (kernels.empty()) {
      if (backend.kernelFormat() == GeneratedKernelFormat::ptx)
        return Error{"the artifact " + dir.string() + " has no PTX for rank " + std::to_string(rank) +
                     "'s fused kernels, which --device " + std::string(backend.name) +
                     " runs (it was written by gradc train, or PTX could not be generated): recompile it with gradc "
                     "compile SPEC -o DIR, or run its reference step (--no-generated-kernels)"};
      return corrupted(graphFile, "the graph runs generated kernels but the artifact has no kernels file for it");
    }
    Expected<std::string> bytes = readFile(dir / kernels);
    if (!bytes) return corrupted(dir / kernels, bytes.error().message);
    if (Status s = checkKernelsTrusted(entry.kernelsTagIn(backend.kernelFormat()), *bytes, graphText, dir / kernels,
                                       trustKernels);
        !s)
      return s.error();
    Expected<std::shared_ptr<const GeneratedKernels>> loaded = backend.loadKernels(*bytes, dir / kernels);
    if (!loaded) return loaded.error();
    if (Status s = (*loaded)->covers(program.graph); !s) return corrupted(dir / kernels, s.message());
    program.kernels = std::move(*loaded);
  }
  return program;
}

}  // namespace gradc::runtime
