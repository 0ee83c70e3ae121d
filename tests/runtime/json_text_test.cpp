// JSON nesting bounded in every reader of files gradc did not necessarily write: a text nested
// 100,000 deep is refused with a message, where it used to overflow the stack.
#include "runtime/core/json_text.h"

#include <string>

#include "runtime/exec/plan_json.h"
#include "runtime/io/artifact.h"
#include "runtime/io/checkpoint.h"
#include "tests/temp_dir.h"

// After LibTorch's headers: c10's logging defines a CHECK of its own, which doctest's replaces.
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;

namespace {

// {"format": FORMAT, "x": [[[...]]]} with `depth` levels of arrays under "x".
std::string nested(const std::string& format, int depth) {
  return "{\"format\": \"" + format + "\", \"x\": " + std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']') + "}";
}

}  // namespace

TEST_CASE("json nesting: depth counts arrays and objects, not brackets inside strings") {
  CHECK(jsonNestingDepth("") == 0);
  CHECK(jsonNestingDepth("3") == 0);
  CHECK(jsonNestingDepth("{}") == 1);
  CHECK(jsonNestingDepth("{\"a\": [1, {\"b\": [[]]}]}") == 5);
  CHECK(jsonNestingDepth("[\"[[[[\", \"\\\"[[[\"]") == 1);  // brackets and an escaped quote in strings
  CHECK(jsonNestingDepth("[[]][[[]]]") == 3);
  CHECK(jsonNestingDepth(nested("f", 100000)) == kMaxJsonNesting + 1);  // stops counting past the limit
  CHECK(jsonNestingError(nested("f", kMaxJsonNesting - 1)).empty());
  CHECK(jsonNestingError(nested("f", kMaxJsonNesting)).find("nested more than 64 levels") != std::string::npos);
  CHECK(parseJsonBounded(nested("f", 10))["format"] == "f");
  CHECK(parseJsonBounded(nested("f", 100000)).is_discarded());
  CHECK(parseJsonBounded("{not json").is_discarded());
}

TEST_CASE("json nesting: a plan, a manifest and a checkpoint nested 100,000 deep are refused, not a crash") {
  Expected<ir::MemoryPlan> plan = planFromJson(nested("gradc-memory-plan", 100000));
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().message.find("nested more than") != std::string::npos);

  testing::TempDir dir("json_nesting");
  std::filesystem::create_directories(dir.path / "artifact");
  dir.write("artifact/manifest.json", nested(kArtifactFormat, 100000));
  CHECK_FALSE(looksLikeArtifact(dir.path / "artifact"));
  Expected<ArtifactManifest> manifest = loadArtifact(dir.path / "artifact");
  REQUIRE_FALSE(manifest.ok());
  CHECK(manifest.error().message.find("nested more than") != std::string::npos);

  std::filesystem::create_directories(dir.path / "checkpoint");
  dir.write("checkpoint/state.json", nested("gradc-checkpoint", 100000));
  Expected<CheckpointData> checkpoint = loadCheckpoint(dir.path / "checkpoint");
  REQUIRE_FALSE(checkpoint.ok());
  CHECK(checkpoint.error().message.find("nested more than") != std::string::npos);
  Expected<SafetensorsFile> weights = loadCheckpointFile(dir.path / "checkpoint", "weights.safetensors");
  REQUIRE_FALSE(weights.ok());
  CHECK(weights.error().message.find("nested more than") != std::string::npos);
}
