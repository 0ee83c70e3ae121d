#include "runtime/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "runtime/dtype_map.h"

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

Expected<TensorMap> initParameters(const ir::Graph& graph, std::uint64_t seed) {
  TensorMap params;
  for (const auto& p : graph.params()) {
    const ir::TensorType& type = p->type();
    at::TensorOptions options = at::TensorOptions().dtype(toScalarType(type.dtype));
    std::string init = ir::getString(p->attrs(), "init").value_or("zeros");
    at::Tensor t;
    if (init == "zeros") {
      t = at::zeros(type.shape, options);
    } else if (init == "ones") {
      t = at::ones(type.shape, options);
    } else if (init == "uniform" || init == "normal") {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(parameterSeed(seed, p->name()));
      t = at::empty(type.shape, options);
      if (init == "uniform") {
        std::optional<double> bound = ir::getFloat(p->attrs(), "bound");
        if (!bound) return Error{"parameter '" + p->name() + "': init \"uniform\" needs a float 'bound'"};
        t.uniform_(-*bound, *bound, gen);
      } else {
        std::optional<double> std = ir::getFloat(p->attrs(), "std");
        if (!std) return Error{"parameter '" + p->name() + "': init \"normal\" needs a float 'std'"};
        t.normal_(0.0, *std, gen);
      }
    } else {
      return Error{"parameter '" + p->name() + "': unknown init \"" + init + "\""};
    }
    params.emplace(p->name(), std::move(t));
  }
  return params;
}

}  // namespace gradc::runtime
