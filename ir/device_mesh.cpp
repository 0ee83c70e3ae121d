#include "ir/device_mesh.h"

#include <cctype>
#include <charconv>

#include "ir/graph.h"

namespace gradc::ir {
namespace {

bool validAxisName(std::string_view name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

Expected<DeviceMesh> DeviceMesh::parse(std::string_view text) {
  DeviceMesh mesh;
  const std::string whole(text);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = part.find('=');
    const std::string_view name = part.substr(0, eq);
    std::int64_t extent = 0;
    const std::string_view number = eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), extent);
    if (!validAxisName(name) || number.empty() || ec != std::errc() || end != number.data() + number.size() ||
        extent < 1)
      return Error{"the mesh '" + whole + "' is not of the form axis=ranks[,axis=ranks...] (e.g. dp=4): '" +
                   std::string(part) + "'"};
    if (mesh.extent(name)) return Error{"the mesh '" + whole + "' names axis '" + std::string(name) + "' twice"};
    mesh.axes.emplace_back(std::string(name), extent);
    if (comma != std::string_view::npos && text.empty())
      return Error{"the mesh '" + whole + "' ends with a comma"};
  }
  if (mesh.axes.empty()) return Error{"the mesh is empty: give it as axis=ranks (e.g. dp=4)"};
  return mesh;
}

std::string DeviceMesh::toString() const {
  std::string out;
  for (const auto& [name, extent] : axes) out += (out.empty() ? "" : ",") + name + "=" + std::to_string(extent);
  return out;
}

std::optional<std::int64_t> DeviceMesh::extent(std::string_view name) const {
  for (const auto& [axis, extent] : axes)
    if (axis == name) return extent;
  return std::nullopt;
}

std::int64_t DeviceMesh::ranks() const {
  std::int64_t n = 1;
  for (const auto& axis : axes) n *= axis.second;
  return n;
}

std::vector<std::int64_t> DeviceMesh::groupOf(std::string_view axis, std::int64_t rank) const {
  if (rank < 0 || rank >= ranks()) return {};
  std::int64_t stride = 1;  // of `axis`: the product of the extents inside it
  for (size_t i = axes.size(); i-- > 0;) {
    const auto& [name, extent] = axes[i];
    if (name == axis) {
      const std::int64_t first = rank - (rank / stride % extent) * stride;
      std::vector<std::int64_t> members;
      for (std::int64_t k = 0; k < extent; ++k) members.push_back(first + k * stride);
      return members;
    }
    stride *= extent;
  }
  return {};
}

std::string DeviceMesh::groupName(std::string_view axis, std::int64_t rank) const {
  const std::vector<std::int64_t> members = groupOf(axis, rank);
  if (members.empty()) return {};
  // Groups along an axis differ in their other coordinates; the smallest member names them all:
  // its rank with the axis' coordinate (0) removed, i.e. counted over the other axes.
  const std::int64_t extent = static_cast<std::int64_t>(members.size());
  const std::int64_t stride = extent > 1 ? members[1] - members[0] : 1;
  const std::int64_t first = members.front();
  const std::int64_t index = first / (stride * extent) * stride + first % stride;
  return std::string(axis) + "/" + std::to_string(index);
}

std::string_view collectiveGroup(const Node& node) {
  auto it = node.attrs().find("group");
  if (it != node.attrs().end())
    if (const std::string* name = std::get_if<std::string>(&it->second)) return *name;
  return kDataParallelAxis;
}

Expected<DeviceMesh> meshOf(const Graph& graph) {
  if (std::optional<std::string> text = getString(graph.attrs(), "mesh")) return DeviceMesh::parse(*text);
  for (const auto& n : graph.nodes())
    if (n->op().collective != Collective::None)
      return DeviceMesh::dataParallel(getInt(n->attrs(), "world").value_or(1));
  return DeviceMesh::dataParallel(1);
}

void setMesh(Graph& graph, const DeviceMesh& mesh) { graph.attrs()["mesh"] = mesh.toString(); }

}  // namespace gradc::ir
