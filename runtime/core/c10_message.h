// The text of an exception thrown by LibTorch (c10::Error and its subclasses carry a C++
// backtrace in what(); users get the message alone) or by anything else.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <string_view>

namespace gradc::runtime {

// Whether an exception's text says an allocation failed: c10's CPU allocator ("not enough
// memory"), its CUDA one ("out of memory"), the standard library's (bad_alloc), the OS's
// (ENOMEM). The one place foreign exceptions are read for it, where they enter gradc.
inline bool saysOutOfMemory(std::string_view what) {
  for (std::string_view sign : {"not enough memory", "out of memory", "Cannot allocate memory", "bad_alloc"})
    if (what.find(sign) != std::string_view::npos) return true;
  return false;
}

inline std::string exceptionMessage(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace gradc::runtime
