#include "runtime/train/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "ir/parameter_init.h"
#include "ir/shard_layout.h"
#include "runtime/core/dtype_map.h"
#include "runtime/io/shard_checkpoint.h"

namespace gradc::runtime {

std::uint64_t parameterSeed(std::uint64_t seed, std::string_view name) {
  // FNV-1a over the name, then a SplitMix64 finaliser over (seed, hash).
  std::uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (h | 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

// One parameter's values, drawn as its initialiser says from its own generator.
at::Tensor initialTensor(const ir::ParameterInit& init, const ir::Shape& shape, at::TensorOptions options,
                         std::uint64_t seed, std::string_view name) {
  if (init.kind == "zeros") return at::zeros(shape, options);
  if (init.kind == "ones") return at::ones(shape, options);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(parameterSeed(seed, name));
  at::Tensor t = at::empty(shape, options);
  if (init.kind == "uniform") t.uniform_(-init.value, init.value, gen);
  else t.normal_(0.0, init.value, gen);
  return t;
}

// A ZeRO stage 3 shard (passes/shard_params.h): this rank's elements of the bucket's
// parameters, each drawn whole as the replicated run draws it, one at a time.
Expected<at::Tensor> initialShard(const ir::Graph& g, const ir::Value& p, std::uint64_t seed) {
  Expected<ShardInfo> info = shardInfo(g, p);
  if (!info) return info.error();
  Expected<std::vector<ir::ParameterInit>> inits =
      ir::decodeParameterInits(ir::getString(p.attrs(), "shard_init").value_or(""));
  if (!inits) return inits.error().withContext("parameter '" + p.name() + "': ");
  if (inits->size() != info->params.size())
    return Error{"parameter '" + p.name() + "': shard_init has " + std::to_string(inits->size()) +
                 " initialisers for " + std::to_string(info->params.size()) + " parameters"};
  const at::TensorOptions options = at::TensorOptions().dtype(toScalarType(p.type().dtype));
  at::Tensor shard = at::zeros(p.type().shape, options);
  for (const ir::ShardSegment& s : ir::shardSegments(info->numels, info->offset, shard.numel())) {
    const at::Tensor whole = initialTensor((*inits)[s.part], info->shapes[s.part], options, seed, info->params[s.part]);
    shard.narrow(0, s.shardOffset, s.length).copy_(whole.view({-1}).narrow(0, s.begin, s.length));
  }
  return shard;
}

}  // namespace

Expected<TensorMap> initParameters(const ir::Graph& graph, std::uint64_t seed) {
  TensorMap params;
  for (const auto& p : graph.params()) {
    const ir::TensorType& type = p->type();
    if (ir::getString(p->attrs(), "init") == "shard") {
      Expected<at::Tensor> shard = initialShard(graph, *p, seed);
      if (!shard) return shard.error();
      params.emplace(p->name(), std::move(*shard));
      continue;
    }
    Expected<ir::ParameterInit> init = ir::parameterInitOf(p->attrs(), p->name());
    if (!init) return init.error();
    params.emplace(p->name(), initialTensor(*init, type.shape, at::TensorOptions().dtype(toScalarType(type.dtype)), seed,
                                            p->name()));
  }
  return params;
}

}  // namespace gradc::runtime
