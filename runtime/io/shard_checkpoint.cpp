#include "runtime/io/shard_checkpoint.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <vector>

#include "ir/shard_layout.h"
#include "runtime/core/dtype_map.h"

namespace gradc::runtime {

Expected<ShardInfo> shardInfo(const ir::Graph& g, const ir::Value& p) {
  ShardInfo info;
  const std::string of = ir::getString(p.attrs(), "shard_of").value_or("");
  info.prefix = ir::getString(p.attrs(), "shard_prefix").value_or("");
  info.offset = ir::getInt(p.attrs(), "shard_offset").value_or(0);
  info.world = ir::getInt(p.attrs(), "shard_world").value_or(1);
  info.params = ir::shardedNames(of);
  // A parameter shard (stage 3) states its parameters' shapes; a state shard's parameters are
  // in the graph.
  const std::optional<std::vector<std::int64_t>> ranks = ir::getIntList(p.attrs(), "shard_part_ranks");
  const std::vector<std::int64_t> extents = ir::getIntList(p.attrs(), "shard_part_shapes").value_or(std::vector<std::int64_t>{});
  size_t e = 0;
  for (size_t i = 0; i < info.params.size(); ++i) {
    if (ranks) {
      const std::int64_t r = i < ranks->size() ? (*ranks)[i] : -1;
      if (r < 0 || e + static_cast<size_t>(r) > extents.size())
        return Error{"internal: the parameter shard '" + p.name() + "' has part shapes that do not match its " +
                         std::to_string(info.params.size()) + " parameters", ErrorKind::Internal};
      info.shapes.emplace_back(extents.begin() + static_cast<std::ptrdiff_t>(e),
                               extents.begin() + static_cast<std::ptrdiff_t>(e + static_cast<size_t>(r)));
      e += static_cast<size_t>(r);
    } else {
      const ir::Value* v = g.findNamed(info.params[i]);
      if (!v) return Error{"internal: sharded state '" + p.name() + "' names '" + info.params[i] + "', which the graph lacks", ErrorKind::Internal};
      info.shapes.push_back(v->type().shape);
    }
    std::int64_t n = 1;
    for (std::int64_t x : info.shapes.back()) n *= x;
    info.numels.push_back(n);
  }
  return info;
}


bool isShardedState(const ir::Value& param) { return ir::getString(param.attrs(), "shard_of").has_value(); }

bool isShardedParameter(const ir::Value& param) { return ir::getString(param.attrs(), "init") == "shard"; }

std::vector<std::pair<std::string, ir::TensorType>> modelParameters(const ir::Graph& graph) {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (const auto& p : graph.params()) {
    if (ir::getString(p->attrs(), "role") == "opt_state") continue;
    if (!isShardedParameter(*p)) {
      out.emplace_back(p->name(), p->type());
      continue;
    }
    Expected<ShardInfo> info = shardInfo(graph, *p);
    if (!info) continue;  // a malformed shard is reported where it is initialised
    for (size_t i = 0; i < info->params.size(); ++i)
      out.emplace_back(info->params[i], ir::TensorType{p->type().dtype, info->shapes[i]});
  }
  return out;
}

bool hasShardedState(const ir::Graph& graph) {
  for (const auto& p : graph.params())
    if (isShardedState(*p)) return true;
  return false;
}

Expected<TensorMap> replicatedState(const ir::Graph& g, const TensorMap& state, Communicator& comm) {
  const bool root = comm.rank() == 0;
  TensorMap out;
  for (const auto& p : g.params()) {
    const at::Tensor& mine = state.at(p->name());
    if (!isShardedState(*p)) {
      if (root) out.emplace(p->name(), mine);
      continue;
    }
    Expected<ShardInfo> info = shardInfo(g, *p);
    if (!info) return info.error();
    at::Tensor shard = mine.contiguous();
    at::Tensor all = root ? at::empty({comm.worldSize() * shard.numel()}, shard.options()) : at::Tensor();
    if (Status s = comm.gather(shard, all, 0, "gather of the optimizer state shard '" + p->name() + "' at save"); !s)
      return s.error();
    if (!root) continue;
    std::int64_t at = 0;
    for (size_t i = 0; i < info->params.size(); ++i) {
      const ir::Shape& shape = info->shapes[i];
      out.emplace(info->prefix + info->params[i],
                  all.narrow(0, at, info->numels[i]).view(std::vector<std::int64_t>(shape.begin(), shape.end())).clone());
      at += info->numels[i];
    }
  }
  return out;
}

Status shardReplicatedState(const ir::Graph& g, TensorMap& state, const std::string& from, bool parametersOnly) {
  std::vector<std::string> replaced;
  for (const auto& p : g.params()) {
    if (!isShardedState(*p) || (parametersOnly && !isShardedParameter(*p))) continue;
    Expected<ShardInfo> info = shardInfo(g, *p);
    if (!info) return info.error();
    const std::int64_t size = p->type().numel();
    at::Tensor shard = at::zeros({size}, at::TensorOptions().dtype(toScalarType(p->type().dtype)));
    std::vector<at::Tensor> full;
    for (size_t i = 0; i < info->params.size(); ++i) {
      const std::string name = info->prefix + info->params[i];
      auto it = state.find(name);
      if (it == state.end())
        return Error{"checkpoint " + from + " has no tensor '" + name + "' (was it written for another model or optimizer?)"};
      if (it->second.numel() != info->numels[i] || it->second.scalar_type() != shard.scalar_type())
        return Error{"checkpoint " + from + ": '" + name + "' does not match its parameter '" + info->params[i] + "' (" +
                     ir::toString(ir::TensorType{p->type().dtype, info->shapes[i]}) + ")"};
      full.push_back(it->second.contiguous().view({-1}));
      replaced.push_back(name);
    }
    for (const ir::ShardSegment& s : ir::shardSegments(info->numels, info->offset, size))
      shard.narrow(0, s.shardOffset, s.length).copy_(full[s.part].narrow(0, s.begin, s.length));
    state[p->name()] = shard;
  }
  for (const std::string& name : replaced) state.erase(name);
  return {};
}

}  // namespace gradc::runtime
