#include "runtime/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>
#include <type_traits>
#include <utility>

#include "runtime/atomic_file.h"
#include "runtime/safetensors.h"

namespace gradc::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kWeightsFile = "weights.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kFormatName = "gradc-checkpoint";

struct CheckpointPaths {
  fs::path dir, parent, tmp, old;
};

Expected<CheckpointPaths> checkpointPaths(const fs::path& requested) {
  fs::path dir = requested.lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "ckpt/" -> "ckpt"
  const fs::path name = dir.filename();
  if (name.empty() || name == "." || name == "..")
    return Error{"checkpoint path '" + requested.string() + "' does not name a directory"};
  fs::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  return CheckpointPaths{dir, parent, parent / (name.string() + ".tmp"), parent / (name.string() + ".old")};
}

Status removeTree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return ioError("cannot remove", path, ec.value());
  return Status::success();
}

Status renamePath(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return Error{"cannot rename '" + from.string() + "' to '" + to.string() + "': " + std::strerror(errno)};
  return Status::success();
}

Expected<json> parseConfig(const std::string& text) {
  if (text.empty()) return json::object();
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Error{"checkpoint config is not valid JSON"};
  if (!config.is_object()) return Error{"checkpoint config must be a JSON object"};
  return config;
}

// Everything of a checkpoint except the final swap, written into `tmp`.
Status writeContents(const fs::path& tmp, const CheckpointData& data, const json& config) {
  std::error_code ec;
  if (!fs::create_directory(tmp, ec)) return ioError("cannot create folder", tmp, ec ? ec.value() : EEXIST);
  // "format": "pt" is what PyTorch-side loaders (transformers) expect in the file metadata.
  if (Status s = saveSafetensors(tmp / kWeightsFile, data.weights, {{"format", "pt"}}); !s) return s;
  if (Status s = saveSafetensors(tmp / kOptimizerFile, data.optimizer); !s) return s;
  json state = {
      {"format", kFormatName},
      {"version", kCheckpointVersion},
      {"step", data.step},
      {"seed", data.seed},
      {"data", {{"epoch", data.data.epoch}, {"index", data.data.index}}},
      {"config", config},
  };
  if (Status s = writeFileAtomic(tmp / kStateFile, state.dump(2) + "\n"); !s) return s;
  return syncDirectory(tmp);
}

// Reads an integer field of state.json.
template <class T>
Expected<T> integerField(const json& state, const char* key, const std::string& where) {
  auto it = state.find(key);
  bool ok = it != state.end() &&
            (std::is_unsigned_v<T> ? it->is_number_unsigned() : (it->is_number_unsigned() || it->is_number_integer()));
  if (ok && std::is_signed_v<T> && it->is_number_unsigned() &&
      it->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
    ok = false;
  if (!ok || (std::is_signed_v<T> && it->get<T>() < 0))
    return Error{where + ": \"" + key + "\" must be a non-negative integer"};
  return it->get<T>();
}

}  // namespace

Status saveCheckpoint(const fs::path& requested, const CheckpointData& data) {
  Expected<CheckpointPaths> paths = checkpointPaths(requested);
  if (!paths) return paths.error();
  const auto& [dir, parent, tmp, old] = *paths;
  const std::string where = "cannot save checkpoint '" + dir.string() + "'";
  if (data.step < 0) return Error{where + ": negative step " + std::to_string(data.step)};
  if (data.data.epoch < 0 || data.data.index < 0) return Error{where + ": negative data position"};
  Expected<json> config = parseConfig(data.config);
  if (!config) return Error{where + ": " + config.error().message};

  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return ioError("cannot create folder", parent, ec.value());
  const bool replacing = fs::exists(dir, ec);
  if (replacing) {
    if (!fs::is_directory(dir, ec)) return Error{where + ": it exists and is not a directory"};
    if (!fs::exists(dir / kStateFile, ec) && !fs::is_empty(dir, ec))
      return Error{where + ": the directory exists and is not a checkpoint (no " + kStateFile + "); refusing to replace it"};
  }

  // 1. Write the new checkpoint beside the old one. A D.tmp left by an interrupted save is stale.
  if (Status s = removeTree(tmp); !s) return s;
  if (Status s = writeContents(tmp, data, *config); !s) {
    (void)removeTree(tmp);
    return Error{where + ": " + s.message()};
  }

  // 2.-3. Swap it in. When D is missing and D.old exists, an earlier save stopped between
  // steps 2 and 3: D.old is the last good checkpoint and stays until the new one is in place.
  if (replacing) {
    if (Status s = removeTree(old); !s) return s;  // stale: D itself is complete
    if (Status s = renamePath(dir, old); !s) return s;
  }
  if (Status s = renamePath(tmp, dir); !s) return s;
  if (Status s = syncDirectory(parent); !s) return s;

  // 4. The previous checkpoint is no longer needed. A failure here leaves a stale D.old that the
  // next save removes; the new checkpoint is already durable, so it is not an error.
  (void)removeTree(old);
  return Status::success();
}

namespace {

// Reads the checkpoint directory `source` itself (no recovery logic).
Expected<CheckpointData> loadFrom(const fs::path& source) {
  std::error_code ec;
  const std::string where = "checkpoint '" + source.string() + "'";
  if (!fs::is_directory(source, ec)) return Error{where + " is not a directory"};

  // state.json first: its version decides how to read the rest.
  if (!fs::exists(source / kStateFile, ec)) return Error{where + " is missing " + kStateFile};
  Expected<std::string> text = readFile(source / kStateFile);
  if (!text) return Error{where + ": " + text.error().message};
  json state = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (state.is_discarded() || !state.is_object()) return Error{where + ": " + kStateFile + " is not a valid JSON object"};
  const std::string state_where = where + ": " + kStateFile;
  auto format = state.find("format");
  if (format == state.end() || *format != kFormatName)
    return Error{state_where + " is not a gradc checkpoint state (\"format\" is not \"" + kFormatName + "\")"};
  auto version = state.find("version");
  if (version == state.end() || !version->is_number_integer())
    return Error{state_where + ": missing integer \"version\""};
  if (version->get<std::int64_t>() != kCheckpointVersion)
    return Error{where + " has format version " + std::to_string(version->get<std::int64_t>()) +
                 "; this build reads version " + std::to_string(kCheckpointVersion)};

  CheckpointData data;
  data.loaded_from = source;
  Expected<std::int64_t> step = integerField<std::int64_t>(state, "step", state_where);
  if (!step) return step.error();
  data.step = *step;
  Expected<std::uint64_t> seed = integerField<std::uint64_t>(state, "seed", state_where);
  if (!seed) return seed.error();
  data.seed = *seed;
  auto position = state.find("data");
  if (position == state.end() || !position->is_object()) return Error{state_where + ": missing object \"data\""};
  Expected<std::int64_t> epoch = integerField<std::int64_t>(*position, "epoch", state_where + " data");
  if (!epoch) return epoch.error();
  Expected<std::int64_t> index = integerField<std::int64_t>(*position, "index", state_where + " data");
  if (!index) return index.error();
  data.data = {*epoch, *index};
  auto config = state.find("config");
  if (config == state.end() || !config->is_object()) return Error{state_where + ": missing object \"config\""};
  data.config = config->dump();

  for (auto [file, target] : {std::pair{kWeightsFile, &data.weights}, std::pair{kOptimizerFile, &data.optimizer}}) {
    if (!fs::exists(source / file, ec)) return Error{where + " is missing " + file};
    Expected<SafetensorsFile> loaded = loadSafetensors(source / file);
    if (!loaded) return Error{where + ": " + loaded.error().message};
    *target = std::move(loaded->tensors);
  }
  return data;
}

}  // namespace

Expected<CheckpointData> loadCheckpoint(const fs::path& requested) {
  Expected<CheckpointPaths> paths = checkpointPaths(requested);
  if (!paths) return paths.error();
  const auto& [dir, parent, tmp, old] = *paths;

  std::error_code ec;
  if (fs::exists(dir, ec)) {
    Expected<CheckpointData> loaded = loadFrom(dir);
    // D only ever appears complete (renamed from a finished D.tmp), so a broken D is damage from
    // outside; the previous checkpoint may still be beside it.
    if (!loaded && fs::exists(old, ec))
      return Error{loaded.error().message + " (a previous checkpoint is in '" + old.string() + "')"};
    return loaded;
  }
  if (fs::exists(old, ec)) return loadFrom(old);  // a save stopped after moving D aside
  std::string message = "no checkpoint at '" + dir.string() + "'";
  if (fs::exists(tmp, ec)) message += " (only the incomplete '" + tmp.string() + "' of an interrupted save)";
  return Error{message};
}

}  // namespace gradc::runtime
