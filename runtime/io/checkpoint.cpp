#include "runtime/io/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/io/atomic_file.h"
#include "runtime/core/json_text.h"
#include "runtime/io/safetensors.h"
#include "runtime/io/sha256.h"

namespace gradc::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kWeightsFile = "weights.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kFormatName = "gradc-checkpoint";
constexpr const char* kMarkerFile = ".gradc-checkpoint";

struct CheckpointPaths {
  fs::path dir, parent, tmp, old, lock;
};

Expected<CheckpointPaths> checkpointPaths(const fs::path& requested) {
  fs::path dir = requested.lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "ckpt/" -> "ckpt"
  const fs::path name = dir.filename();
  if (name.empty() || name == "." || name == "..")
    return Error{"checkpoint path '" + requested.string() + "' does not name a directory"};
  fs::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  const std::string hidden = "." + name.string() + ".gradc-";
  return CheckpointPaths{dir, parent, parent / (hidden + "save"), parent / (hidden + "previous"), parent / (hidden + "lock")};
}

// Whether `dir` is a folder gradc wrote: its marker, or (checkpoints from before the marker) a
// state.json of this format.
bool ownedByGradc(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / kMarkerFile, ec)) return true;
  Expected<std::string> text = readFile(dir / kStateFile);
  if (!text) return false;
  json state = parseJsonBounded(*text);
  return state.is_object() && state.value("format", "") == kFormatName;
}

// The entries of a checkpoint folder gradc did not write, by name.
std::vector<std::string> foreignEntries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name != kWeightsFile && name != kOptimizerFile && name != kStateFile && name != kMarkerFile) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Removes a working folder (T or O) only when it is gradc's own.
// Ok when `path` (a save's working folder) is absent or gradc's: a folder gradc wrote, or an
// empty one (what a save stopped right after creating T leaves).
Status notInTheWay(const fs::path& path, const std::string& where) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return Status::success();
  if (!fs::is_directory(fs::symlink_status(path, ec)) || (!fs::is_empty(path, ec) && !ownedByGradc(path)))
    return Error{where + ": '" + path.string() + "' is in the way and was not made by gradc; move it elsewhere"};
  return Status::success();
}

Status removeOwn(const fs::path& path, const std::string& where) {
  if (Status s = notInTheWay(path, where); !s) return s;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return Status::success();
  fs::remove_all(path, ec);
  if (ec) return ioError("cannot remove", path, ec.value());
  return Status::success();
}

Expected<std::string> fileChecksum(const fs::path& path) {
  Expected<std::string> bytes = readFile(path);
  if (!bytes) return bytes.error();
  return sha256Hex(*bytes);
}

// The seal of a state: the sha256 of its compact JSON (keys sorted) without "state_sha256".
std::string stateSeal(json state) {
  state.erase("state_sha256");
  return sha256Hex(state.dump());
}

// `bytes` of `file` against the sha256 state.json records for it; ok for a version 1 checkpoint
// from before checksums (no "files").
Status checkChecksum(const json& state, const std::string& file, std::string_view bytes, const std::string& where) {
  auto files = state.find("files");
  if (files == state.end()) {
    if (state.value("version", 0) >= 2)
      return Error{where + ": " + kStateFile + " has no \"files\" checksums (removed after it was saved)"};
    return Status::success();
  }
  const std::string stateWhere = where + ": " + kStateFile;
  if (!files->is_object()) return Error{stateWhere + ": \"files\" must be an object"};
  auto entry = files->find(file);
  if (entry == files->end() || !entry->is_object() || !entry->contains("sha256") || !(*entry)["sha256"].is_string())
    return Error{stateWhere + ": no sha256 for " + file};
  if (sha256Hex(bytes) != (*entry)["sha256"].get<std::string>())
    return Error{where + ": " + file + " does not match its sha256 in " + kStateFile +
                 " (the file was changed or damaged after it was saved)"};
  return Status::success();
}

Status renamePath(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return Error{"cannot rename '" + from.string() + "' to '" + to.string() + "': " + std::strerror(errno)};
  return Status::success();
}

Expected<json> parseConfig(const std::string& text) {
  if (text.empty()) return json::object();
  if (std::string deep = jsonNestingError(text); !deep.empty()) return Error{"checkpoint config: " + deep};
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Error{"checkpoint config is not valid JSON"};
  if (!config.is_object()) return Error{"checkpoint config must be a JSON object"};
  return config;
}

// Everything of a checkpoint except the final swap, written into `tmp`.
Status writeContents(const fs::path& tmp, const CheckpointData& data, const json& config) {
  std::error_code ec;
  if (!fs::create_directory(tmp, ec)) return ioError("cannot create folder", tmp, ec ? ec.value() : EEXIST);
  if (Status s = writeFileAtomic(tmp / kMarkerFile, ""); !s) return s;
  // "format": "pt" is what PyTorch-side loaders (transformers) expect in the file metadata. The
  // weights file also describes itself (kWeightsModelKey, kWeightsVocabularyKey), so that it can
  // be evaluated on its own, away from state.json.
  std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (config.contains("model") && config["model"].is_string()) metadata[kWeightsModelKey] = config["model"];
  if (config.contains("vocabulary") && config["vocabulary"].is_string())
    metadata[kWeightsVocabularyKey] = config["vocabulary"];
  if (Status s = saveSafetensors(tmp / kWeightsFile, data.weights, metadata); !s) return s;
  if (Status s = saveSafetensors(tmp / kOptimizerFile, data.optimizer); !s) return s;
  json files = json::object();
  for (const char* file : {kWeightsFile, kOptimizerFile}) {
    Expected<std::string> sum = fileChecksum(tmp / file);  // of the bytes on disk
    if (!sum) return sum.error();
    files[file] = {{"sha256", *sum}};
  }
  json state = {
      {"format", kFormatName},
      {"version", kCheckpointVersion},
      {"step", data.step},
      {"seed", data.seed},
      {"data", {{"epoch", data.data.epoch}, {"index", data.data.index}}},
      {"config", config},
      {"files", files},
  };
  state["state_sha256"] = stateSeal(state);
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

// Ok when a checkpoint may be written at `dir`: it does not exist, is empty, or is a checkpoint
// gradc wrote holding nothing else (saving replaces the whole folder).
Status replaceableByCheckpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  if (!fs::is_directory(dir, ec)) return Error{"it exists and is not a directory"};
  if (fs::is_empty(dir, ec)) return {};
  if (!ownedByGradc(dir))
    return Error{"the directory exists and is not a checkpoint (gradc did not write it); refusing to replace it"};
  std::vector<std::string> foreign = foreignEntries(dir);
  if (foreign.empty()) return {};
  std::string names;
  for (const std::string& n : foreign) names += (names.empty() ? "'" : ", '") + n + "'";
  return Error{"it holds " + names + ", which gradc did not write; move " + (foreign.size() == 1 ? "it" : "them") +
               " elsewhere first (saving replaces the folder)"};
}

}  // namespace

Status saveCheckpoint(const fs::path& requested, const CheckpointData& data) {
  Expected<CheckpointPaths> paths = checkpointPaths(requested);
  if (!paths) return paths.error();
  const auto& [dir, parent, tmp, old, lock] = *paths;
  const std::string where = "cannot save checkpoint '" + dir.string() + "'";
  if (data.step < 0) return Error{where + ": negative step " + std::to_string(data.step)};
  if (data.data.epoch < 0 || data.data.index < 0) return Error{where + ": negative data position"};
  Expected<json> config = parseConfig(data.config);
  if (!config) return config.error().withContext(where + ": ");

  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return ioError("cannot create folder", parent, ec.value());
  const bool replacing = fs::exists(dir, ec);
  if (Status s = replaceableByCheckpoint(dir); !s) return s.error().withContext(where + ": ");

  // 1. Write the new checkpoint beside the old one. A T left by an interrupted save is stale.
  if (Status s = removeOwn(tmp, where); !s) return s;
  if (Status s = writeContents(tmp, data, *config); !s) {
    fs::remove_all(tmp, ec);
    return s.error().withContext(where + ": ");
  }

  // 2.-3. Swap it in. When D is missing and D.old exists, an earlier save stopped between
  // steps 2 and 3: D.old is the last good checkpoint and stays until the new one is in place.
  if (replacing) {
    if (Status s = removeOwn(old, where); !s) return s;  // stale: D itself is complete
    if (Status s = renamePath(dir, old); !s) return s;
  }
  if (Status s = renamePath(tmp, dir); !s) return s;
  if (Status s = syncDirectory(parent); !s) return s;

  // 4. The previous checkpoint is no longer needed. A failure here leaves a stale O that the
  // next save removes; the new checkpoint is already durable, so it is not an error.
  fs::remove_all(old, ec);
  return Status::success();
}

namespace {

// Reads the checkpoint directory `source` itself (no recovery logic).
// `tensors` false: state.json alone (verified as always), weights and optimizer left empty.
Expected<CheckpointData> loadFrom(const fs::path& source, bool tensors) {
  std::error_code ec;
  const std::string where = "checkpoint '" + source.string() + "'";
  if (!fs::is_directory(source, ec)) return Error{where + " is not a directory"};

  // state.json first: its version decides how to read the rest.
  if (!fs::exists(source / kStateFile, ec)) return Error{where + " is missing " + kStateFile};
  Expected<std::string> text = readFile(source / kStateFile);
  if (!text) return text.error().withContext(where + ": ");
  if (std::string deep = jsonNestingError(*text); !deep.empty()) return Error{where + ": " + kStateFile + ": " + deep};
  json state = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (state.is_discarded() || !state.is_object()) return Error{where + ": " + kStateFile + " is not a valid JSON object"};
  const std::string state_where = where + ": " + kStateFile;
  auto format = state.find("format");
  if (format == state.end() || *format != kFormatName)
    return Error{state_where + " is not a gradc checkpoint state (\"format\" is not \"" + kFormatName + "\")"};
  auto version = state.find("version");
  if (version == state.end() || !version->is_number_integer())
    return Error{state_where + ": missing integer \"version\""};
  if (version->get<std::int64_t>() != kCheckpointVersion && version->get<std::int64_t>() != 1)
    return Error{where + " has format version " + std::to_string(version->get<std::int64_t>()) +
                 "; this build reads versions 1 and " + std::to_string(kCheckpointVersion)};
  if (version->get<std::int64_t>() >= 2) {
    auto seal = state.find("state_sha256");
    if (seal == state.end() || !seal->is_string())
      return Error{state_where + ": no \"state_sha256\" (removed after it was saved)"};
    if (seal->get<std::string>() != stateSeal(state))
      return Error{state_where + " was changed after it was saved (its state_sha256 does not match: an edited step, "
                   "seed, data position or configuration would resume a different run)"};
  }

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
  if (!tensors) return data;

  for (auto [file, target] : {std::pair{kWeightsFile, &data.weights}, std::pair{kOptimizerFile, &data.optimizer}}) {
    if (!fs::exists(source / file, ec)) return Error{where + " is missing " + file};
    Expected<std::string> bytes = readFile(source / file);  // read once: checked, then parsed
    if (!bytes) return bytes.error().withContext(where + ": ");
    if (Status s = checkChecksum(state, file, *bytes, where); !s) return s.error();
    Expected<SafetensorsFile> loaded = parseSafetensors(*bytes, (source / file).string());
    if (!loaded) return loaded.error().withContext(where + ": ");
    *target = std::move(loaded->tensors);
  }
  return data;
}

Expected<CheckpointData> loadCheckpointFrom(const fs::path& requested, bool tensors) {
  Expected<CheckpointPaths> paths = checkpointPaths(requested);
  if (!paths) return paths.error();
  const auto& [dir, parent, tmp, old, lock] = *paths;

  std::error_code ec;
  if (fs::exists(dir, ec)) {
    Expected<CheckpointData> loaded = loadFrom(dir, tensors);
    // D only ever appears complete (renamed from a finished D.tmp), so a broken D is damage from
    // outside; the previous checkpoint may still be beside it.
    if (!loaded && fs::exists(old, ec))
      return Error{loaded.error().message + " (a previous checkpoint is in '" + old.string() + "')"};
    return loaded;
  }
  if (fs::exists(old, ec)) return loadFrom(old, tensors);  // a save stopped after moving D aside
  std::string message = "no checkpoint at '" + dir.string() + "'";
  if (fs::exists(tmp, ec)) message += " (only the incomplete '" + tmp.string() + "' of an interrupted save)";
  return Error{message};
}
}  // namespace

Expected<CheckpointData> loadCheckpoint(const fs::path& requested) { return loadCheckpointFrom(requested, true); }

Expected<CheckpointData> loadCheckpointState(const fs::path& requested) { return loadCheckpointFrom(requested, false); }

Expected<SafetensorsFile> loadCheckpointFile(const fs::path& dir, const std::string& file) {
  const std::string where = "checkpoint '" + dir.string() + "'";
  Expected<std::string> text = readFile(dir / kStateFile);
  if (!text) return text.error().withContext(where + ": ");
  if (std::string deep = jsonNestingError(*text); !deep.empty()) return Error{where + ": " + kStateFile + ": " + deep};
  json state = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object()) return Error{where + ": " + kStateFile + " is not a valid JSON object"};
  Expected<std::string> bytes = readFile(dir / file);
  if (!bytes) return bytes.error().withContext(where + ": ");
  if (Status s = checkChecksum(state, file, *bytes, where); !s) return s.error();
  Expected<SafetensorsFile> loaded = parseSafetensors(*bytes, (dir / file).string());
  if (!loaded) return loaded.error().withContext(where + ": ");
  return loaded;
}

Expected<CheckpointLock> CheckpointLock::acquire(const fs::path& requested) {
  Expected<CheckpointPaths> paths = checkpointPaths(requested);
  if (!paths) return paths.error();
  const std::string where = "cannot save checkpoints to '" + paths->dir.string() + "'";
  std::error_code ec;
  fs::create_directories(paths->parent, ec);
  if (ec) return Error{where + ": cannot create folder '" + paths->parent.string() + "': " + ec.message()};
  const int fd = ::open(paths->lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Error{where + ": cannot create '" + paths->lock.string() + "': " + std::strerror(errno)};
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return Error{where + ": cannot lock '" + paths->lock.string() + "': " + std::strerror(err)};
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Error{"checkpoint folder '" + paths->dir.string() + "' is in use" + (pid.empty() ? "" : " by pid " + pid) +
                 " (another run saves there); choose another --save folder or wait for it to end"};
  }
  // A folder no checkpoint may replace, or a save's working folder someone else put there, is
  // refused now, before the run's first step.
  Status usable = replaceableByCheckpoint(paths->dir);
  if (!usable) usable = usable.error().withContext(where + ": ");
  for (const fs::path* working : {&paths->tmp, &paths->old})
    if (usable) usable = notInTheWay(*working, where);
  if (!usable) {
    ::close(fd);
    return usable.error();
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    return Error{where + ": cannot write '" + paths->lock.string() + "': " + std::strerror(err)};
  }
  return CheckpointLock(fd);
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace gradc::runtime
