// Passes by name, for `gradc opt --passes a,b` and for tests.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace gradc::passes {

// nullptr when no pass has that name.
std::unique_ptr<Pass> createPass(std::string_view name);
std::vector<std::string_view> passNames();

}  // namespace gradc::passes
