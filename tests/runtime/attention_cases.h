// Attention test cases shared by the tiled kernels' tests (attention_test.cpp) and the composed
// kernels' (attention_composite_test.cpp): the shapes, mask and dropout of one node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradc::testing {

struct AttentionCase {
  std::string name;
  std::vector<std::int64_t> qLead, kvLead;  // leading axes of q, and of k and v (1: shared)
  std::int64_t S, Skv, Dh, Dv;
  bool causal;
  double p = 0.0;         // dropout
  bool stridedQ = false;  // q as a view with strided rows
};

// [lead..., rows, cols].
inline std::vector<std::int64_t> withRows(std::vector<std::int64_t> lead, std::int64_t rows, std::int64_t cols) {
  lead.push_back(rows);
  lead.push_back(cols);
  return lead;
}

}  // namespace gradc::testing
