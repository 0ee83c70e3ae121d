// A parameter's initialiser as its attributes state it (init = "uniform" with bound, "normal"
// with std, "ones", "zeros"; runtime/train/init.h draws the values), and the list of them a ZeRO
// stage 3 shard carries in its shard_init attribute (passes/shard_params.h) so that a rank
// initialises its shard of a bucket as the replicated run initialises the bucket's parameters:
// "uniform 0.0625;normal 0.02;ones", one entry per parameter in bucket order, values with 17
// significant digits (exact for f64).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/status.h"

namespace gradc::ir {

struct ParameterInit {
  std::string kind = "zeros";  // "uniform", "normal", "ones", "zeros"
  double value = 0;            // uniform: the bound; normal: the std; otherwise unused
};

// From a parameter's attributes (init and its bound or std); an unknown kind or a missing value
// is an error naming the parameter.
Expected<ParameterInit> parameterInitOf(const AttrMap& attrs, std::string_view param);

std::string encodeParameterInits(const std::vector<ParameterInit>& inits);
Expected<std::vector<ParameterInit>> decodeParameterInits(std::string_view text);

}  // namespace gradc::ir
