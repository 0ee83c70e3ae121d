#include "ir/parameter_init.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace gradc::ir {

namespace {
bool hasValue(std::string_view kind) { return kind == "uniform" || kind == "normal"; }
bool known(std::string_view kind) { return hasValue(kind) || kind == "ones" || kind == "zeros"; }
}  // namespace

Expected<ParameterInit> parameterInitOf(const AttrMap& attrs, std::string_view param) {
  ParameterInit init;
  init.kind = getString(attrs, "init").value_or("zeros");
  if (!known(init.kind)) return Error{"parameter '" + std::string(param) + "': unknown init \"" + init.kind + "\""};
  if (!hasValue(init.kind)) return init;
  const char* key = init.kind == "uniform" ? "bound" : "std";
  std::optional<double> value = getFloat(attrs, key);
  if (!value)
    return Error{"parameter '" + std::string(param) + "': init \"" + init.kind + "\" needs a float '" + key + "'"};
  init.value = *value;
  return init;
}

std::string encodeParameterInits(const std::vector<ParameterInit>& inits) {
  std::string out;
  for (const ParameterInit& i : inits) {
    if (!out.empty()) out += ';';
    out += i.kind;
    if (hasValue(i.kind)) {
      char buf[40];
      std::snprintf(buf, sizeof buf, " %.17g", i.value);
      out += buf;
    }
  }
  return out;
}

Expected<std::vector<ParameterInit>> decodeParameterInits(std::string_view text) {
  std::vector<ParameterInit> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(';', at), text.size());
    const std::string_view entry = text.substr(at, end - at);
    const size_t space = entry.find(' ');
    ParameterInit init;
    init.kind = std::string(entry.substr(0, space));
    if (!known(init.kind) || hasValue(init.kind) != (space != std::string_view::npos))
      return Error{"shard_init: '" + std::string(entry) + "' is not an initialiser"};
    if (hasValue(init.kind)) {
      const std::string number(entry.substr(space + 1));
      char* stop = nullptr;
      init.value = std::strtod(number.c_str(), &stop);
      if (number.empty() || *stop != '\0') return Error{"shard_init: '" + std::string(entry) + "' has no number"};
    }
    out.push_back(std::move(init));
    at = end + 1;
  }
  return out;
}

}  // namespace gradc::ir
