// The last line of defence of gradc and gradc-run: whatever escapes a command (an allocation
// that failed, an exception from LibTorch or the standard library, one thrown on another
// thread) ends the process with one line on stderr and exit code 1 (an internal or environment
// failure), never with std::terminate's "terminate called after ...", an abort or a backtrace.
// Errors the commands expect are reported by them (exit 2 for the user's mistakes); this only
// catches what nobody expected.
#pragma once

#include <functional>
#include <string>

namespace gradc::tools {

// Installs the std::terminate handler (exceptions escaping other threads, noexcept
// boundaries) and a SIGBUS handler (a memory-mapped data file truncated while in use: one line,
// exit 1), and runs `command`, turning an escaping exception into the one-line error.
int runGuarded(const std::string& program, const std::function<int()>& command);

// What the process holds that a library thread can fail in: c10d's store client runs a thread of
// its own, and an exception escaping it (a rendezvous peer that resets the connection) ends the
// process through std::terminate. While a context is set, a transport failure's line names it
// and the cause in plain words, and the exit code is 2, as for any failed rendezvous or rank
// (docs/reliability.md); any other exception stays internal (exit 1). "" clears it.
void setFailureContext(const std::string& context);

// The line printed for an exception's what(): its first line only (c10::Error appends a
// backtrace), and "out of memory" named for std::bad_alloc.
std::string failureLine(const std::string& program, const char* what, bool outOfMemory);
// Whether an error's text says an allocation failed (c10's, the standard library's, the OS's).
bool isOutOfMemory(const std::string& what);

}  // namespace gradc::tools
