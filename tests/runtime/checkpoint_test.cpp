// Checkpoints: round trip, replacement, recovery from interrupted saves, corrupt contents.
#include "runtime/io/checkpoint.h"
#include "runtime/io/sha256.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/io/atomic_file.h"
#include "runtime/io/safetensors.h"

#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace gradc;
using namespace gradc::runtime;

namespace {

using gradc::testing::TempDir;

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

at::Tensor values(std::vector<std::int64_t> shape, double offset) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return at::arange(n, at::TensorOptions().dtype(at::kFloat)).mul(0.5).add(offset).reshape(shape);
}

// A small MLP's parameters and AdamW state; `offset` makes different checkpoints different.
CheckpointData sampleCheckpoint(double offset, std::int64_t step) {
  CheckpointData data;
  data.weights.emplace("fc1.weight", values({4, 3}, offset));
  data.weights.emplace("fc1.bias", values({4}, offset + 1));
  data.weights.emplace("fc2.weight", values({2, 4}, offset + 2));
  for (const auto& [name, w] : data.weights) {
    data.optimizer.emplace("opt.adam_m." + name, w.mul(0.1));
    data.optimizer.emplace("opt.adam_v." + name, w.mul(w));
  }
  data.optimizer.emplace("opt.step", at::arange(step, step + 1, at::TensorOptions().dtype(at::kLong)).reshape({}));
  data.step = step;
  data.seed = 0x8000000000000005ull;  // above INT64_MAX: the seed is a full unsigned 64-bit value
  data.data = {2, 17};
  data.config = R"({"model":"models/mlp.yaml","lr":0.001,"batch":32,"vocabulary":"bytes","remat":{"strategy":"sqrt"}})";
  return data;
}

bool sameTensors(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.scalar_type() != t.scalar_type() || it->second.sizes() != t.sizes() ||
        !at::equal(it->second, t))
      return false;
  }
  return true;
}

void checkSame(const CheckpointData& got, const CheckpointData& want) {
  CHECK(sameTensors(got.weights, want.weights));
  CHECK(sameTensors(got.optimizer, want.optimizer));
  CHECK(got.step == want.step);
  CHECK(got.seed == want.seed);
  CHECK(got.data == want.data);
  CHECK(nlohmann::json::parse(got.config) == nlohmann::json::parse(want.config));
}

Expected<CheckpointData> loadOk(const fs::path& dir) {
  Expected<CheckpointData> loaded = loadCheckpoint(dir);
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  return loaded;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("checkpoint: save and load round trip") {
  TempDir tmp("roundtrip");
  const fs::path dir = tmp.path / "run" / "ckpt";  // parent folders are created
  const CheckpointData data = sampleCheckpoint(0.0, 120);
  Status saved = saveCheckpoint(dir, data);
  REQUIRE_MESSAGE(saved.ok(), saved.message());
  CHECK(entries(dir) ==
        std::set<std::string>{"weights.safetensors", "optimizer.safetensors", "state.json", ".gradc-checkpoint"});
  CHECK(entries(dir.parent_path()) == std::set<std::string>{"ckpt"});  // no working folders left behind

  Expected<CheckpointData> loaded = loadOk(dir);
  checkSame(*loaded, data);
  CHECK(loaded->loaded_from == dir);

  // The weights file holds exactly the parameters, under their spec names, readable on its own.
  Expected<SafetensorsFile> weights = loadSafetensors(dir / "weights.safetensors");
  REQUIRE(weights.ok());
  CHECK(sameTensors(weights->tensors, data.weights));
  CHECK(weights->metadata.at("format") == "pt");

  nlohmann::json state = nlohmann::json::parse(readText(dir / "state.json"));
  CHECK(state["format"] == "gradc-checkpoint");
  CHECK(state["version"] == 2);
  CHECK(state["step"] == 120);
  CHECK(state["seed"].get<std::uint64_t>() == 0x8000000000000005ull);
  CHECK(state["data"] == nlohmann::json{{"epoch", 2}, {"index", 17}});
  CHECK(state["config"]["remat"]["strategy"] == "sqrt");

  // A trailing separator names the same checkpoint.
  Expected<CheckpointData> slash = loadOk(dir.string() + "/");
  CHECK(slash->step == 120);
}

TEST_CASE("checkpoint: saving over an existing checkpoint replaces it") {
  TempDir tmp("overwrite");
  const fs::path dir = tmp.path / "ckpt";
  REQUIRE(saveCheckpoint(dir, sampleCheckpoint(0.0, 10)).ok());
  const CheckpointData second = sampleCheckpoint(100.0, 20);
  REQUIRE(saveCheckpoint(dir, second).ok());
  checkSame(*loadOk(dir), second);
  CHECK(entries(tmp.path) == std::set<std::string>{"ckpt"});

  // Fewer tensors than before: the old files do not linger.
  CheckpointData third = sampleCheckpoint(7.0, 30);
  third.optimizer.clear();
  third.config = "";
  REQUIRE(saveCheckpoint(dir, third).ok());
  Expected<CheckpointData> loaded = loadOk(dir);
  CHECK(loaded->optimizer.empty());
  CHECK(loaded->config == "{}");
  CHECK(loaded->step == 30);
}

TEST_CASE("checkpoint: interrupted saves never lose the last good checkpoint") {
  TempDir tmp("crash");
  const fs::path dir = tmp.path / "ckpt";
  const fs::path tmp_dir = tmp.path / ".ckpt.gradc-save";
  const fs::path old_dir = tmp.path / ".ckpt.gradc-previous";
  const CheckpointData good = sampleCheckpoint(0.0, 50);
  const CheckpointData newer = sampleCheckpoint(3.0, 60);
  REQUIRE(saveCheckpoint(dir, good).ok());

  SUBCASE("crash while writing: a partial working folder is ignored, then cleaned up") {
    fs::create_directories(tmp_dir);
    std::ofstream(tmp_dir / ".gradc-checkpoint");  // the first file a save writes
    std::ofstream(tmp_dir / "weights.safetensors") << "partial";
    checkSame(*loadOk(dir), good);
    REQUIRE(saveCheckpoint(dir, newer).ok());
    checkSame(*loadOk(dir), newer);
    CHECK(entries(tmp.path) == std::set<std::string>{"ckpt"});
  }
  SUBCASE("crash between moving the old checkpoint aside and moving the new one in") {
    fs::rename(dir, old_dir);
    fs::create_directories(tmp_dir);
    std::ofstream(tmp_dir / ".gradc-checkpoint");
    std::ofstream(tmp_dir / "state.json") << "{";
    Expected<CheckpointData> recovered = loadOk(dir);
    checkSame(*recovered, good);
    CHECK(recovered->loaded_from == old_dir);
    // The next save puts a new checkpoint in place and only then drops the old one.
    REQUIRE(saveCheckpoint(dir, newer).ok());
    Expected<CheckpointData> loaded = loadOk(dir);
    checkSame(*loaded, newer);
    CHECK(loaded->loaded_from == dir);
    CHECK(entries(tmp.path) == std::set<std::string>{"ckpt"});
  }
  SUBCASE("crash while deleting the old checkpoint: the new one is loaded") {
    REQUIRE(saveCheckpoint(tmp.path / "other", newer).ok());
    fs::rename(dir, old_dir);
    fs::rename(tmp.path / "other", dir);
    fs::remove(old_dir / "optimizer.safetensors");  // half deleted
    checkSame(*loadOk(dir), newer);
    REQUIRE(saveCheckpoint(dir, good).ok());
    checkSame(*loadOk(dir), good);
    CHECK(entries(tmp.path) == std::set<std::string>{"ckpt"});
  }
  SUBCASE("a damaged checkpoint is an error that points at the previous one") {
    REQUIRE(saveCheckpoint(tmp.path / "other", newer).ok());
    fs::rename(tmp.path / "other", old_dir);
    std::ofstream(dir / "state.json", std::ios::trunc) << "{";
    Expected<CheckpointData> loaded = loadCheckpoint(dir);
    REQUIRE(!loaded.ok());
    CHECK(loaded.error().message.find("a previous checkpoint is in '" + old_dir.string() + "'") != std::string::npos);
  }
  SUBCASE("a failed save keeps the previous checkpoint") {
    CheckpointData broken = newer;
    broken.weights.emplace("bad", at::Tensor());
    Status s = saveCheckpoint(dir, broken);
    REQUIRE(!s.ok());
    CHECK(s.message().find("'bad' is undefined") != std::string::npos);
    checkSame(*loadOk(dir), good);
    CHECK(entries(tmp.path) == std::set<std::string>{"ckpt"});
  }
  SUBCASE("nothing to load") {
    fs::remove_all(dir);
    fs::create_directories(tmp_dir);
    Expected<CheckpointData> none = loadCheckpoint(dir);
    REQUIRE(!none.ok());
    CHECK(none.error().message.find("no checkpoint at") != std::string::npos);
    CHECK(none.error().message.find("interrupted save") != std::string::npos);
  }
}

TEST_CASE("checkpoint: corrupt or foreign contents are errors") {
  TempDir tmp("corrupt");
  const fs::path dir = tmp.path / "ckpt";
  REQUIRE(saveCheckpoint(dir, sampleCheckpoint(0.0, 5)).ok());
  const std::string state = readText(dir / "state.json");
  auto expectError = [&](const std::string& fragment) {
    Expected<CheckpointData> loaded = loadCheckpoint(dir);
    REQUIRE_MESSAGE(!loaded.ok(), "expected an error containing: " << fragment);
    INFO("message: " << loaded.error().message);
    CHECK(loaded.error().message.find(fragment) != std::string::npos);
  };
  // An edit resealed (as a careful forger would), so the checks behind the seal are reached.
  auto editState = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(state);
    edit(j);
    if (j.contains("state_sha256")) {
      nlohmann::json unsealed = j;
      unsealed.erase("state_sha256");
      j["state_sha256"] = sha256Hex(unsealed.dump());
    }
    std::ofstream(dir / "state.json", std::ios::trunc) << j.dump();
  };

  SUBCASE("an edited step, not resealed") {
    nlohmann::json j = nlohmann::json::parse(state);
    j["step"] = 1000;
    std::ofstream(dir / "state.json", std::ios::trunc) << j.dump(2);
    expectError("was changed after it was saved");
  }
  SUBCASE("the checksum list removed") {
    editState([](nlohmann::json& j) { j.erase("files"); });
    expectError("has no \"files\" checksums");
  }
  SUBCASE("the seal removed") {
    editState([](nlohmann::json& j) { j.erase("state_sha256"); });
    expectError("no \"state_sha256\"");
  }
  SUBCASE("a version 1 checkpoint, from before checksums, still loads") {
    editState([](nlohmann::json& j) {
      j["version"] = 1;
      j.erase("files");
      j.erase("state_sha256");
    });
    Expected<CheckpointData> loaded = loadCheckpoint(dir);
    CHECK_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  }

  SUBCASE("state.json is not JSON") {
    std::ofstream(dir / "state.json", std::ios::trunc) << state.substr(0, state.size() / 2);
    expectError("state.json is not a valid JSON object");
  }
  SUBCASE("state.json is missing") {
    fs::remove(dir / "state.json");
    expectError("is missing state.json");
  }
  SUBCASE("version mismatch") {
    editState([](nlohmann::json& j) { j["version"] = 3; });
    expectError("has format version 3; this build reads versions 1 and 2");
  }
  SUBCASE("not a gradc state") {
    editState([](nlohmann::json& j) { j.erase("format"); });
    expectError("not a gradc checkpoint state");
  }
  SUBCASE("bad fields") {
    editState([](nlohmann::json& j) { j["step"] = -3; });
    expectError("\"step\" must be a non-negative integer");
  }
  SUBCASE("bad seed") {
    editState([](nlohmann::json& j) { j["seed"] = "42"; });
    expectError("\"seed\" must be a non-negative integer");
  }
  SUBCASE("bad data position") {
    editState([](nlohmann::json& j) { j["data"].erase("index"); });
    expectError("\"index\" must be a non-negative integer");
  }
  SUBCASE("config is not an object") {
    editState([](nlohmann::json& j) { j["config"] = nlohmann::json::array(); });
    expectError("missing object \"config\"");
  }
  SUBCASE("missing weights") {
    fs::remove(dir / "weights.safetensors");
    expectError("is missing weights.safetensors");
  }
  SUBCASE("truncated optimizer state") {
    const std::string bytes = readText(dir / "optimizer.safetensors");
    std::ofstream(dir / "optimizer.safetensors", std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3);
    expectError("optimizer.safetensors");
  }
}

TEST_CASE("checkpoint: save refuses foreign directories and invalid inputs") {
  TempDir tmp("refuse");
  const fs::path dir = tmp.path / "mydata";
  fs::create_directories(dir);
  std::ofstream(dir / "important.txt") << "keep me";
  Status s = saveCheckpoint(dir, sampleCheckpoint(0.0, 1));
  REQUIRE(!s.ok());
  CHECK(s.message().find("not a checkpoint") != std::string::npos);
  CHECK(readText(dir / "important.txt") == "keep me");
  CHECK(entries(tmp.path) == std::set<std::string>{"mydata"});

  CheckpointData bad_config = sampleCheckpoint(0.0, 1);
  bad_config.config = "{\"lr\": ";
  Status c = saveCheckpoint(tmp.path / "c", bad_config);
  REQUIRE(!c.ok());
  CHECK(c.message().find("config is not valid JSON") != std::string::npos);
  bad_config.config = "[1]";
  CHECK(!saveCheckpoint(tmp.path / "c", bad_config).ok());
  CHECK(!fs::exists(tmp.path / "c"));

  // An empty directory is fine to fill.
  fs::create_directories(tmp.path / "empty");
  CHECK(saveCheckpoint(tmp.path / "empty", sampleCheckpoint(0.0, 1)).ok());
  CHECK(!saveCheckpoint(tmp.path / ".", sampleCheckpoint(0.0, 1)).ok());
}

TEST_CASE("checkpoint: only gradc's own folders and files are removed; a second saver is refused") {
  TempDir tmp("neighbours");
  const fs::path dir = tmp.path / "ckpt";
  // The user's own ckpt.tmp/ and ckpt.old (names earlier versions used) are never touched.
  fs::create_directories(tmp.path / "ckpt.tmp");
  std::ofstream(tmp.path / "ckpt.tmp" / "mine.txt") << "keep";
  std::ofstream(tmp.path / "ckpt.old") << "keep too";
  REQUIRE(saveCheckpoint(dir, sampleCheckpoint(0.0, 1)).ok());
  REQUIRE(saveCheckpoint(dir, sampleCheckpoint(1.0, 2)).ok());
  CHECK(readText(tmp.path / "ckpt.tmp" / "mine.txt") == "keep");
  CHECK(readText(tmp.path / "ckpt.old") == "keep too");
  CHECK(entries(tmp.path) == std::set<std::string>{"ckpt", "ckpt.tmp", "ckpt.old"});

  // A working name taken by something gradc did not make: refused, left alone.
  fs::create_directories(tmp.path / ".ckpt.gradc-save");
  std::ofstream(tmp.path / ".ckpt.gradc-save" / "notes") << "x";
  Status blocked = saveCheckpoint(dir, sampleCheckpoint(2.0, 3));
  REQUIRE(!blocked.ok());
  CHECK(blocked.message().find("not made by gradc") != std::string::npos);
  CHECK(readText(tmp.path / ".ckpt.gradc-save" / "notes") == "x");
  CHECK(loadOk(dir)->step == 2);
  fs::remove_all(tmp.path / ".ckpt.gradc-save");

  // A file the user put inside the checkpoint folder: saving would drop it, so it is refused.
  std::ofstream(dir / "README") << "my notes";
  Status inside = saveCheckpoint(dir, sampleCheckpoint(2.0, 3));
  REQUIRE(!inside.ok());
  CHECK(inside.message().find("'README', which gradc did not write") != std::string::npos);
  CHECK(readText(dir / "README") == "my notes");
  fs::remove(dir / "README");
  CHECK(saveCheckpoint(dir, sampleCheckpoint(2.0, 3)).ok());

  // One saver at a time: the lock names its holder; released when it is dropped.
  {
    Expected<CheckpointLock> first = CheckpointLock::acquire(dir);
    REQUIRE_MESSAGE(first.ok(), first.error().message);
    Expected<CheckpointLock> second = CheckpointLock::acquire(dir);
    REQUIRE(!second.ok());
    CHECK(second.error().message.find("is in use by pid " + std::to_string(::getpid())) != std::string::npos);
  }
  CHECK(CheckpointLock::acquire(dir).ok());
  // Acquiring creates the parent folders; an impossible location fails at once.
  CHECK(CheckpointLock::acquire(tmp.path / "new" / "deep" / "ckpt").ok());
  CHECK(fs::is_directory(tmp.path / "new" / "deep"));
  std::ofstream(tmp.path / "afile") << "x";
  Expected<CheckpointLock> under = CheckpointLock::acquire(tmp.path / "afile" / "ckpt");
  REQUIRE(!under.ok());
  CHECK(under.error().message.find("cannot save checkpoints to") != std::string::npos);
  // Before the first step, the lock also refuses a folder no checkpoint may replace, and a user's
  // file where a save keeps its working copy; both are left as they are.
  fs::create_directories(tmp.path / "mine");
  std::ofstream(tmp.path / "mine" / "notes.txt") << "keep";
  Expected<CheckpointLock> mine = CheckpointLock::acquire(tmp.path / "mine");
  REQUIRE(!mine.ok());
  CHECK(mine.error().message.find("is not a checkpoint (gradc did not write it)") != std::string::npos);
  std::ofstream(tmp.path / ".fresh.gradc-save") << "a user's file";
  Expected<CheckpointLock> inTheWay = CheckpointLock::acquire(tmp.path / "fresh");
  REQUIRE(!inTheWay.ok());
  CHECK(inTheWay.error().message.find("is in the way and was not made by gradc") != std::string::npos);
  CHECK(readText(tmp.path / "mine" / "notes.txt") == "keep");
  CHECK(readText(tmp.path / ".fresh.gradc-save") == "a user's file");
}

TEST_CASE("checkpoint: a tensor file changed after saving does not resume") {
  TempDir tmp("checksum");
  const fs::path dir = tmp.path / "ckpt";
  REQUIRE(saveCheckpoint(dir, sampleCheckpoint(0.0, 4)).ok());
  nlohmann::json state = nlohmann::json::parse(readText(dir / "state.json"));
  CHECK(state["files"]["weights.safetensors"]["sha256"].get<std::string>().size() == 64);
  // One bit flipped in the last byte of tensor data: still a valid safetensors file.
  std::string bytes = readText(dir / "weights.safetensors");
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  std::ofstream(dir / "weights.safetensors", std::ios::binary | std::ios::trunc) << bytes;
  REQUIRE(loadSafetensors(dir / "weights.safetensors").ok());
  Expected<CheckpointData> loaded = loadCheckpoint(dir);
  REQUIRE(!loaded.ok());
  CHECK(loaded.error().message.find("weights.safetensors does not match its sha256") != std::string::npos);
  // A version 1 checkpoint from before checksums (no "files", no seal) still loads.
  state.erase("files");
  state.erase("state_sha256");
  state["version"] = 1;
  std::ofstream(dir / "state.json", std::ios::trunc) << state.dump();
  CHECK(loadCheckpoint(dir).ok());
}

TEST_CASE("atomic file: replaces content whole, cleans up, and names the path in errors") {
  TempDir tmp("atomic");
  const fs::path file = tmp.path / "f.txt";
  REQUIRE(writeFileAtomic(file, "first").ok());
  REQUIRE(writeFileAtomic(file, "second, longer").ok());
  Expected<std::string> text = readFile(file);
  REQUIRE(text.ok());
  CHECK(*text == "second, longer");
  CHECK(entries(tmp.path) == std::set<std::string>{"f.txt"});

  {
    // A writer that is dropped without commit() leaves the target as it was and no temporary.
    Expected<AtomicFileWriter> writer = AtomicFileWriter::open(file);
    REQUIRE(writer.ok());
    REQUIRE(writer->write("partial").ok());
    CHECK(entries(tmp.path).size() == 2);
  }
  CHECK(*readFile(file) == "second, longer");
  CHECK(entries(tmp.path) == std::set<std::string>{"f.txt"});

  Status missing = writeFileAtomic(tmp.path / "no" / "f.txt", "x");
  REQUIRE(!missing.ok());
  CHECK(missing.message().find((tmp.path / "no" / "f.txt").string()) != std::string::npos);
  CHECK(missing.message().find("No such file or directory") != std::string::npos);
  Status onto_folder = writeFileAtomic(tmp.path, "x");
  CHECK(!onto_folder.ok());
  CHECK(entries(tmp.path) == std::set<std::string>{"f.txt"});
  CHECK(!readFile(tmp.path / "absent").ok());
}
