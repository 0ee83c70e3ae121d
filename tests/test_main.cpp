#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "runtime/backends/kernel_targets.h"

// Every suite plans with the backends' descriptions, as gradc does (ir/kernel_target.h).
int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  doctest::Context context(argc, argv);
  return context.run();
}
