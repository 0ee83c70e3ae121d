// safetensors: round trips, the exact byte layout, determinism, hostile files, and
// interoperability with PyTorch (a reader and a writer written against the format in Python).
#include "runtime/io/safetensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/io/data.h"

#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace gradc;
using namespace gradc::runtime;

namespace {

using gradc::testing::TempDir;

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file from a header text and a data buffer: the 8-byte length is written here.
std::string rawFile(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  return bytes + header + data;
}

// 0..n-1 as `type`, shaped; floats shifted and scaled so that negative and fractional values
// appear, all exactly representable in every float type.
at::Tensor sample(at::ScalarType type, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  at::Tensor t = at::arange(n, at::TensorOptions().dtype(at::kDouble));
  if (type == at::kBool) return t.remainder(2).to(at::kBool).reshape(shape);
  if (c10::isFloatingType(type)) t = t.sub(5).mul(0.25);
  else if (type != at::kByte) t = t.sub(5);
  return t.to(type).reshape(shape);
}

bool sameTensor(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

const std::vector<at::ScalarType> kAllTypes = {at::kBool, at::kByte,  at::kChar,     at::kShort, at::kInt,
                                               at::kLong, at::kHalf, at::kBFloat16, at::kFloat, at::kDouble};

bool pythonTorchAvailable() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("safetensors: round trip of every dtype, a 0-dim and an empty tensor") {
  TempDir dir("roundtrip");
  TensorMap tensors;
  for (at::ScalarType type : kAllTypes)
    tensors.emplace(std::string("t.") + std::string(*safetensorsDtypeName(type)), sample(type, {3, 4}));
  tensors.emplace("scalar", at::arange(1, at::TensorOptions().dtype(at::kFloat)).reshape({}).add(3.5));
  tensors.emplace("empty", at::zeros({0, 3}, at::TensorOptions().dtype(at::kDouble)));
  // Non-contiguous input is written in row-major order of its logical shape.
  tensors.emplace("transposed", sample(at::kFloat, {4, 3}).t());
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode ✓"}};

  REQUIRE(saveSafetensors(dir / "a.safetensors", tensors, metadata).ok());
  Expected<SafetensorsFile> loaded = loadSafetensors(dir / "a.safetensors");
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  CHECK(loaded->metadata == metadata);
  REQUIRE(loaded->tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    REQUIRE(loaded->tensors.count(name) == 1);
    const at::Tensor& got = loaded->tensors.at(name);
    CHECK(sameTensor(got, t));
    CHECK(got.is_contiguous());
  }
  CHECK(loaded->tensors.at("scalar").dim() == 0);
  CHECK(loaded->tensors.at("scalar").item<float>() == 3.5f);
  CHECK(loaded->tensors.at("empty").numel() == 0);

  // Loaded tensors own their memory: they outlive the file and every other object.
  at::Tensor kept = loaded->tensors.at("t.F32");
  loaded = Error{"dropped"};
  fs::remove(dir / "a.safetensors");
  CHECK(sameTensor(kept, sample(at::kFloat, {3, 4})));
}

TEST_CASE("safetensors: exact byte layout of a small file") {
  TempDir dir("layout");
  TensorMap tensors;
  tensors.emplace("w", at::arange(1, 3, at::TensorOptions().dtype(at::kFloat)).reshape({2, 1}));  // 1, 2
  tensors.emplace("n", at::arange(7, 8, at::TensorOptions().dtype(at::kLong)).reshape({}));    // 7
  tensors.emplace("flag", sample(at::kBool, {3}).logical_not());                                 // 1, 0, 1
  REQUIRE(saveSafetensors(dir / "s.safetensors", tensors, {{"format", "pt"}}).ok());
  const std::string bytes = readBytes(dir / "s.safetensors");

  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);  // the data buffer starts 8-byte aligned
  REQUIRE(bytes.size() == 8 + n + 19);
  const std::string header = bytes.substr(8, n);

  // Layout by descending dtype rank (I64, F32, BOOL), each tensor aligned to its element size;
  // "__metadata__" first; compact JSON; spaces up to the next multiple of 8.
  const std::string expected =
      R"({"__metadata__":{"format":"pt"},)"
      R"("n":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("w":{"dtype":"F32","shape":[2,1],"data_offsets":[8,16]},)"
      R"("flag":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]}})";
  CHECK(header.substr(0, expected.size()) == expected);
  CHECK(header.size() - expected.size() < 8);
  CHECK(header.find_first_not_of(' ', expected.size()) == std::string::npos);

  // The same facts through a JSON parser.
  nlohmann::json j = nlohmann::json::parse(header);
  CHECK(j.size() == 4);
  CHECK(j["__metadata__"] == nlohmann::json{{"format", "pt"}});
  CHECK(j["n"]["dtype"] == "I64");
  CHECK(j["n"]["shape"] == nlohmann::json::array());
  CHECK(j["n"]["data_offsets"] == nlohmann::json{0, 8});
  CHECK(j["w"]["dtype"] == "F32");
  CHECK(j["w"]["shape"] == nlohmann::json{2, 1});
  CHECK(j["w"]["data_offsets"] == nlohmann::json{8, 16});
  CHECK(j["flag"]["dtype"] == "BOOL");
  CHECK(j["flag"]["shape"] == nlohmann::json{3});
  CHECK(j["flag"]["data_offsets"] == nlohmann::json{16, 19});

  // Little-endian data: int64 7, float 1.0f = 0x3f800000, 2.0f = 0x40000000, bools 1 0 1.
  const std::string data = bytes.substr(8 + n);
  CHECK(data == std::string("\x07\0\0\0\0\0\0\0" "\0\0\x80\x3f" "\0\0\0\x40" "\x01\x00\x01", 19));
}

TEST_CASE("safetensors: matches the reference writer's bytes") {
  TempDir dir("reference");
  // The reference implementation's own serialisation test: one F32 tensor "attn0" [1, 1, 2, 3]
  // holding 0..5 gives a 72-byte header (65 bytes of JSON + 7 spaces of alignment).
  TensorMap tensors;
  tensors.emplace("attn0", at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({1, 1, 2, 3}));
  REQUIRE(saveSafetensors(dir / "r.safetensors", tensors).ok());
  std::string expected_header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  expected_header.append(7, ' ');
  std::string expected = rawFile(expected_header);
  for (float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) expected.append(reinterpret_cast<const char*>(&v), 4);
  CHECK(readBytes(dir / "r.safetensors") == expected);

  // No tensors and no metadata: "{}" and six spaces.
  REQUIRE(saveSafetensors(dir / "e.safetensors", {}).ok());
  CHECK(readBytes(dir / "e.safetensors") == rawFile("{}      "));
  Expected<SafetensorsFile> empty = loadSafetensors(dir / "e.safetensors");
  REQUIRE(empty.ok());
  CHECK(empty->tensors.empty());
  CHECK(empty->metadata.empty());
}

TEST_CASE("safetensors: saves are byte-deterministic") {
  TempDir dir("determinism");
  TensorMap tensors;
  for (at::ScalarType type : kAllTypes)
    tensors.emplace("layer" + std::to_string(static_cast<int>(type)) + ".weight", sample(type, {2, 5}));
  std::map<std::string, std::string> metadata = {{"b", "2"}, {"a", "1"}, {"c", "3"}};
  REQUIRE(saveSafetensors(dir / "1.safetensors", tensors, metadata).ok());
  REQUIRE(saveSafetensors(dir / "2.safetensors", tensors, metadata).ok());
  CHECK(readBytes(dir / "1.safetensors") == readBytes(dir / "2.safetensors"));

  // Saving what was loaded reproduces the file.
  Expected<SafetensorsFile> loaded = loadSafetensors(dir / "1.safetensors");
  REQUIRE(loaded.ok());
  REQUIRE(saveSafetensors(dir / "3.safetensors", loaded->tensors, loaded->metadata).ok());
  CHECK(readBytes(dir / "1.safetensors") == readBytes(dir / "3.safetensors"));
}

TEST_CASE("safetensors: corrupt and hostile files are errors") {
  TempDir dir("corrupt");
  const fs::path file = dir / "bad.safetensors";
  auto load = [&](const std::string& bytes) {
    writeBytes(file, bytes);
    return loadSafetensors(file);
  };
  auto expectError = [&](const std::string& bytes, const std::string& fragment) {
    Expected<SafetensorsFile> result = load(bytes);
    REQUIRE_MESSAGE(!result.ok(), "accepted a file that should fail with: " << fragment);
    INFO("message: " << result.error().message);
    CHECK(result.error().message.find(fragment) != std::string::npos);
    CHECK(result.error().message.find(file.string()) != std::string::npos);
  };
  const std::string f32x2 = std::string(8, '\0');

  SUBCASE("too short") {
    expectError("", "too short (0 bytes)");
    expectError(std::string("\x08\0\0\0", 4), "too short (4 bytes)");
  }
  SUBCASE("absurd header length") {
    std::string huge(8, '\0');
    huge[7] = 0x10;  // 2^60
    expectError(huge + "{}", "exceeds the limit of 100000000 bytes");
    std::string longer_than_file = rawFile("{}");
    longer_than_file[0] = 100;
    expectError(longer_than_file, "header length 100 exceeds the 2 bytes that follow it");
  }
  SUBCASE("invalid JSON") {
    expectError(rawFile(R"({"a": {"dtype": "F32", )"), "not valid JSON");
    expectError(rawFile("{\"a\xff\": 1}"), "not valid JSON");  // not UTF-8
    expectError(rawFile("[1, 2]"), "not a JSON object");
    expectError(rawFile(R"({"a":1} x)"), "not valid JSON");
  }
  SUBCASE("bad entries") {
    expectError(rawFile(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", f32x2), "unknown dtype \"F31\"");
    expectError(rawFile(R"({"a":{"dtype":"U32","shape":[2],"data_offsets":[0,8]}})", f32x2), "\"U32\" is not supported");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2), "non-negative integers");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", f32x2), "non-negative integers");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2]}})", f32x2), "data_offsets");
    expectError(rawFile(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", f32x2), "dtype");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", f32x2), "unknown field \"x\"");
    expectError(rawFile(R"({"a":[1]})", f32x2), "not a JSON object");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2),
                "duplicate key \"a\"");
    expectError(rawFile(R"({"__metadata__":{"k":1}})"), "not a string");
    expectError(rawFile(R"({"__metadata__":"k"})"), "\"__metadata__\" is not a JSON object");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[[[[2]]]],"data_offsets":[0,8]}})", f32x2), "nests deeper");
  }
  SUBCASE("shape and offsets disagree") {
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", f32x2.substr(0, 4)),
                "need 8 bytes but data_offsets [0,4] span 4");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32x2), "end before they begin");
    expectError(rawFile(R"({"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", f32x2),
                "overflows");
  }
  SUBCASE("overlapping, gapped, out-of-bounds offsets and trailing data") {
    const std::string twelve(12, '\0');
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", twelve),
                "overlaps tensor 'a'");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", twelve),
                "gap of 4 bytes before tensor 'b'");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"), "lie outside the 4-byte data buffer");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32x2), "4 bytes of trailing data");
    expectError(rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32x2), "gap of 4 bytes");
  }
  SUBCASE("invalid bool bytes") {
    expectError(rawFile(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x02", 2)),
                "BOOL data holds bytes other than 0 and 1");
  }
  SUBCASE("not a file") {
    Expected<SafetensorsFile> missing = loadSafetensors(dir / "missing.safetensors");
    REQUIRE(!missing.ok());
    CHECK(missing.error().message.find("No such file") != std::string::npos);
    Expected<SafetensorsFile> folder = loadSafetensors(dir.path);
    REQUIRE(!folder.ok());
    CHECK(folder.error().message.find("not a regular file") != std::string::npos);
  }
}

TEST_CASE("safetensors: every truncation and random corruption is rejected or parsed, never a crash") {
  TempDir dir("fuzz");
  TensorMap tensors;
  tensors.emplace("a", sample(at::kFloat, {3, 2}));
  tensors.emplace("b", sample(at::kBool, {5}));
  tensors.emplace("c", sample(at::kLong, {2}));
  REQUIRE(saveSafetensors(dir / "ok.safetensors", tensors, {{"k", "v"}}).ok());
  const std::string good = readBytes(dir / "ok.safetensors");
  REQUIRE(parseSafetensors(good).ok());

  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    CHECK(!parseSafetensors(std::string_view(good).substr(0, n)).ok());
  }
  CHECK(!parseSafetensors(good + " ").ok());  // trailing garbage

  // Random byte changes: each result is an Error or a valid file (a change inside float data or the
  // header padding leaves one); what matters is that none crashes or reads out of bounds.
  SplitMix64 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng.below(3));
    for (int f = 0; f < flips; ++f) bytes[rng.below(bytes.size())] = static_cast<char>(rng.below(256));
    if (!parseSafetensors(bytes).ok()) ++rejected;
  }
  CHECK(rejected > 1000);
}

TEST_CASE("safetensors: save errors leave the previous file intact") {
  TempDir dir("save_errors");
  const fs::path file = dir / "w.safetensors";
  TensorMap good;
  good.emplace("x", sample(at::kFloat, {2}));
  REQUIRE(saveSafetensors(file, good).ok());
  const std::string before = readBytes(file);

  auto expectError = [&](const TensorMap& tensors, const std::string& fragment,
                         const std::map<std::string, std::string>& metadata = {}) {
    Status s = saveSafetensors(file, tensors, metadata);
    REQUIRE(!s.ok());
    INFO("message: " << s.message());
    CHECK(s.message().find(fragment) != std::string::npos);
    CHECK(readBytes(file) == before);
  };
  TensorMap undefined;
  undefined.emplace("u", at::Tensor());
  expectError(undefined, "'u' is undefined");
  TensorMap complex;
  complex.emplace("c", at::zeros({2}, at::TensorOptions().dtype(at::kComplexFloat)));
  expectError(complex, "cannot store");
  TensorMap reserved;
  reserved.emplace("__metadata__", sample(at::kFloat, {1}));
  expectError(reserved, "reserved");
  TensorMap bad_name;
  bad_name.emplace("bad\xff", sample(at::kFloat, {1}));
  expectError(bad_name, "not valid UTF-8");
  expectError(good, "not valid UTF-8", {{"k", "\xc3"}});

  Status no_folder = saveSafetensors(dir / "missing" / "w.safetensors", good);
  REQUIRE(!no_folder.ok());
  CHECK(no_folder.message().find("missing/w.safetensors") != std::string::npos);
  CHECK(no_folder.message().find("No such file") != std::string::npos);

  // Nothing but the file itself remains: no temporaries from the failed attempts.
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    INFO(entry.path().string());
    CHECK(entry.path().filename() == "w.safetensors");
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("safetensors: PyTorch reads our files and we read files written in Python") {
  if (!pythonTorchAvailable()) {
    MESSAGE("skipped: /usr/bin/python3 with torch is not available");
    return;
  }
  TempDir dir("python");
  TensorMap tensors;
  for (at::ScalarType type : kAllTypes)
    tensors.emplace(std::string("t.") + std::string(*safetensorsDtypeName(type)), sample(type, {3, 4}));
  tensors.emplace("scalar", sample(at::kDouble, {}));
  REQUIRE(saveSafetensors(dir / "cpp.safetensors", tensors, {{"format", "pt"}}).ok());

  // Reads the header with json and the data with torch.frombuffer (no safetensors package), checks
  // every tensor against the same formula as sample(), then writes py.safetensors the same way
  // (tensors in name order, so the C++ reader also sees a layout other than its own).
  const std::string script = R"PY(
import json, struct, sys, torch
DT = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32,
      "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64}
def sample(dtype, shape):
    n = 1
    for d in shape: n *= d
    t = torch.arange(n, dtype=torch.float64)
    if dtype == torch.bool: return (t % 2).to(torch.bool).reshape(shape)
    if dtype.is_floating_point: t = (t - 5) * 0.25
    elif dtype != torch.uint8: t = t - 5
    return t.to(dtype).reshape(shape)
folder = sys.argv[1]
raw = open(folder + "/cpp.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
assert n % 8 == 0, n
header = json.loads(raw[8:8 + n].decode("utf-8"))
assert header.pop("__metadata__") == {"format": "pt"}
assert len(header) == 11, sorted(header)
buf = bytearray(raw[8 + n:])
for name, info in header.items():
    dtype = DT[info["dtype"]]
    begin, end = info["data_offsets"]
    count = (end - begin) // torch.tensor([], dtype=dtype).element_size()
    t = torch.frombuffer(buf, dtype=dtype, count=count, offset=begin).reshape(info["shape"])
    want = sample(dtype, info["shape"])
    assert torch.equal(t, want), (name, t, want)
out = {}
for i, (code, dtype) in enumerate(sorted(DT.items())):
    out["py." + code] = sample(dtype, [2, 3])
header, chunks, offset = {"__metadata__": {"writer": "python"}}, [], 0
for name in sorted(out):
    t = out[name].contiguous()
    data = bytes(t.view(torch.uint8).reshape(-1).tolist()) if t.dtype != torch.bool else bytes(t.to(torch.uint8).reshape(-1).tolist())
    header[name] = {"dtype": [k for k, v in DT.items() if v == t.dtype][0], "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(data)]}
    chunks.append(data)
    offset += len(data)
text = json.dumps(header).encode("utf-8")
with open(folder + "/py.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
print("OK")
)PY";
  std::ofstream(dir / "check.py") << script;
  const std::string command = "/usr/bin/python3 " + (dir / "check.py").string() + " " + dir.path.string() + " > " +
                              (dir / "out.txt").string() + " 2>&1";
  const int rc = std::system(command.c_str());
  INFO("python output:\n" << readBytes(dir / "out.txt"));
  REQUIRE(rc == 0);
  CHECK(readBytes(dir / "out.txt") == "OK\n");

  Expected<SafetensorsFile> from_python = loadSafetensors(dir / "py.safetensors");
  REQUIRE_MESSAGE(from_python.ok(), (from_python.ok() ? "" : from_python.error().message));
  CHECK(from_python->metadata == std::map<std::string, std::string>{{"writer", "python"}});
  CHECK(from_python->tensors.size() == kAllTypes.size());
  for (at::ScalarType type : kAllTypes) {
    const std::string name = "py." + std::string(*safetensorsDtypeName(type));
    INFO(name);
    REQUIRE(from_python->tensors.count(name) == 1);
    CHECK(sameTensor(from_python->tensors.at(name), sample(type, {2, 3})));
  }
}

TEST_CASE("safetensors: dtype names") {
  CHECK(safetensorsDtypeName(at::kFloat) == "F32");
  CHECK(safetensorsDtypeName(at::kBFloat16) == "BF16");
  CHECK(safetensorsDtypeName(at::kBool) == "BOOL");
  CHECK(!safetensorsDtypeName(at::kComplexDouble).has_value());
  CHECK((scalarTypeFromSafetensors("I64") == at::kLong));
  CHECK(!scalarTypeFromSafetensors("U64").has_value());
  CHECK(!scalarTypeFromSafetensors("float32").has_value());
}
