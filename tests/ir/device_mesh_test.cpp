// The device mesh (ir/device_mesh.h): its text form, the group each collective names, and the
// verifier's check of collectives against the graph's mesh.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/device_mesh.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

using namespace gradc;
using namespace gradc::ir;

TEST_CASE("a device mesh reads and prints as axis=ranks, axes in order") {
  Expected<DeviceMesh> m = DeviceMesh::parse("dp=2,tp=4");
  REQUIRE(m);
  CHECK(m->toString() == "dp=2,tp=4");
  CHECK(m->ranks() == 8);
  CHECK(m->extent("tp") == 4);
  CHECK(!m->extent("pp"));
  CHECK(DeviceMesh::dataParallel(3).toString() == "dp=3");
  for (const char* bad : {"", "dp", "dp=", "dp=0", "dp=-2", "dp=2,", "2=dp", "dp=2,dp=2", "dp=2x", "d p=2"}) {
    CAPTURE(bad);
    CHECK(!DeviceMesh::parse(bad));
  }
  CHECK(DeviceMesh::parse("dp=2,dp=4").error().message.find("twice") != std::string::npos);
}

TEST_CASE("a rank's group along an axis: the ranks differing from it only there, named alike on each member") {
  const DeviceMesh m = DeviceMesh::parse("dp=2,tp=3").value();
  // Row-major, tp innermost: ranks 0-2 are dp 0's tensor-parallel group.
  CHECK(m.groupOf("tp", 4) == std::vector<std::int64_t>{3, 4, 5});
  CHECK(m.groupOf("dp", 4) == std::vector<std::int64_t>{1, 4});
  CHECK(m.groupOf("dp", 0) == std::vector<std::int64_t>{0, 3});
  CHECK(m.groupOf("pp", 0).empty());
  CHECK(m.groupOf("tp", 6).empty());
  CHECK(m.groupOf("tp", -1).empty());
  // Every rank of a group names it alike; the groups of one axis all differ.
  for (const char* axis : {"dp", "tp"}) {
    std::set<std::string> names;
    for (std::int64_t r = 0; r < m.ranks(); ++r) {
      for (std::int64_t member : m.groupOf(axis, r)) CHECK(m.groupName(axis, member) == m.groupName(axis, r));
      names.insert(m.groupName(axis, r));
    }
    CHECK(static_cast<std::int64_t>(names.size()) == m.ranks() / *m.extent(axis));
  }
  CHECK(m.groupName("tp", 4) == "tp/1");
  CHECK(m.groupName("dp", 5) == "dp/2");
  // Three axes: the middle one's groups.
  const DeviceMesh three = DeviceMesh::parse("dp=2,pp=2,tp=2").value();
  CHECK(three.groupOf("pp", 5) == std::vector<std::int64_t>{5, 7});
  CHECK(three.groupOf("dp", 2) == std::vector<std::int64_t>{2, 6});
  CHECK(DeviceMesh::dataParallel(4).groupOf("dp", 2) == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(DeviceMesh::dataParallel(4).groupName("dp", 2) == "dp/0");
}

namespace {

// A rank's loss all-reduce in a mesh of `mesh` (empty: no mesh attribute), spanning `group`.
std::string lossReduce(const std::string& mesh, const std::string& group, int world) {
  std::string graphAttrs = mesh.empty() ? "" : " {mesh = \"" + mesh + "\"}";
  std::string groupAttr = group.empty() ? "" : ", group = \"" + group + "\"";
  return "graph g" + graphAttrs + "\n  input %x : f32[1]\n  %0 = all_reduce_start(%x) {seq = 0, world = " +
         std::to_string(world) + groupAttr + "} : f32[1] comm\n" +
         "  %1 = all_reduce_wait(%0) {part_ranks = [1], part_shapes = [1], seq = 0, world = " + std::to_string(world) +
         groupAttr + "} : f32[1] comm\n  output loss = %1\n";
}

Status verifyText(const std::string& text) {
  Expected<Graph> g = parseGraph(text, "mesh.gir");
  if (!g) return g.error();
  return verify(*g);
}

}  // namespace

TEST_CASE("every collective spans an axis of the graph's mesh, its world that axis' extent") {
  CHECK(verifyText(lossReduce("dp=2", "dp", 2)).ok());
  CHECK(verifyText(lossReduce("", "dp", 2)).ok());  // no mesh: dp over the collectives' world
  CHECK(verifyText(lossReduce("", "", 2)).ok());    // no group: dp
  CHECK(verifyText(lossReduce("dp=2,tp=4", "tp", 4)).ok());

  Status noAxis = verifyText(lossReduce("dp=2", "tp", 2));
  CHECK(noAxis.message().find("group 'tp', which is no axis of the mesh dp=2") != std::string::npos);
  Status wrongWorld = verifyText(lossReduce("dp=2", "dp", 4));
  CHECK(wrongWorld.message().find("world 4 is not the extent of its group 'dp' in the mesh dp=2") !=
        std::string::npos);
  Status badMesh = verifyText(lossReduce("dp=two", "dp", 2));
  CHECK(badMesh.message().find("the graph attribute mesh") != std::string::npos);

  // The group prints and parses back.
  Expected<Graph> g = parseGraph(lossReduce("dp=2", "dp", 2), "mesh.gir");
  REQUIRE(g);
  const std::string text = printGraph(*g);
  CHECK(text.find("group = \"dp\"") != std::string::npos);
  CHECK(text.find("mesh = \"dp=2\"") != std::string::npos);
  Expected<Graph> again = parseGraph(text, "again.gir");
  REQUIRE(again);
  CHECK(printGraph(*again) == text);
  Expected<DeviceMesh> mesh = meshOf(*again);
  REQUIRE(mesh);
  CHECK(mesh->toString() == "dp=2");
  for (const auto& n : again->nodes()) CHECK(collectiveGroup(*n) == "dp");
}
