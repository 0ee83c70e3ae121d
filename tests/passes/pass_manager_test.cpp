#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "tests/ir/test_util.h"

using namespace gradc;
using namespace gradc::passes;

namespace {

const char* kGraph = R"(graph g
  input %x : f32[4, 8]
  %0 = relu(%x) : f32[4, 8] fwd  # act
  %1 = tanh(%x) : f32[4, 8] fwd  # dead
  output o = %0
)";

// Breaks an invariant on purpose: retypes a node's result without changing the op.
class CorruptingPass final : public Pass {
 public:
  std::string_view name() const override { return "corrupt"; }
  Expected<bool> run(ir::Graph& g) override {
    ir::Node* n = g.nodes()[0].get();
    n->attrs()["dim"] = std::int64_t{0};  // relu has no 'dim' attribute
    return true;
  }
};

// Changes nothing and says so.
class NoOpPass final : public Pass {
 public:
  std::string_view name() const override { return "noop"; }
  Expected<bool> run(ir::Graph&) override { return false; }
};

class FailingPass final : public Pass {
 public:
  std::string_view name() const override { return "fails"; }
  Expected<bool> run(ir::Graph&) override { return Error{"budget too small"}; }
};

}  // namespace

TEST_CASE("the verifier after a changing pass names the pass that broke an invariant") {
  ir::Graph g = testing::parseOrFail(kGraph);
  PassManager pm;
  pm.add<DeadCodeElimination>().add<CorruptingPass>().add<NoOpPass>();
  Expected<bool> r = pm.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("verifier failed after pass 'corrupt'") != std::string::npos);
  CHECK(r.error().message.find("unknown attribute 'dim'") != std::string::npos);
}

TEST_CASE("a failing pass is named in the error") {
  ir::Graph g = testing::parseOrFail(kGraph);
  PassManager pm;
  pm.add<FailingPass>();
  Expected<bool> r = pm.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "pass 'fails' failed: budget too small");
}

TEST_CASE("print-after-all and dump-dir show every stage") {
  ir::Graph g = testing::parseOrFail(kGraph);
  std::ostringstream log;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "gradc-pm-dump-test";
  std::filesystem::remove_all(dir);
  PassManagerOptions opts;
  opts.printAfterAll = &log;
  opts.dumpDir = dir;
  PassManager pm(opts);
  pm.add<DeadCodeElimination>().add<NoOpPass>();
  Expected<bool> r = pm.run(g);
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(log.str().find("// ----- IR after dce -----\ngraph g\n") != std::string::npos);
  CHECK(log.str().find("// ----- IR after noop (unchanged) -----") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "00-input.gir"));
  CHECK(std::filesystem::exists(dir / "01-dce.gir"));
  CHECK(std::filesystem::exists(dir / "02-noop.gir"));
  std::ifstream in(dir / "00-input.gir");
  std::stringstream first;
  first << in.rdbuf();
  CHECK(first.str() == kGraph);
  std::filesystem::remove_all(dir);
}

TEST_CASE("passes are found by name") {
  CHECK(createPass("dce") != nullptr);
  CHECK(createPass("nope") == nullptr);
  CHECK(passNames().front() == "dce");
}
