// The text of an exception thrown by LibTorch (c10::Error and its subclasses carry a C++
// backtrace in what(); users get the message alone) or by anything else.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace gradc::runtime {

inline std::string exceptionMessage(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace gradc::runtime
