#include "tools/failure_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "runtime/comm/comm_error.h"
#include "runtime/core/c10_message.h"
#include "tools/commands.h"

namespace gradc::tools {

namespace {

std::string gProgram = "gradc";
// Set by setFailureContext, read by the terminate handler on whichever thread fails. The
// strings are never freed: a handler may still be reading an earlier one.
std::atomic<const std::string*> gContext{nullptr};

std::string describeCurrent(bool& outOfMemory) {
  outOfMemory = false;
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    outOfMemory = true;
    return e.what();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    outOfMemory = isOutOfMemory(what);
    return what;
  } catch (...) {
    return "an unknown exception";
  }
}

[[noreturn]] void onTerminate() {
  std::string line;
  int code = kExitInternal;
  if (std::current_exception()) {
    bool oom = false;
    const std::string what = describeCurrent(oom);
    const std::string* context = gContext.load();
    // Only a transport failure is the context's (a peer closed, garbage, a timeout): any other
    // exception on any thread stays internal.
    const std::string cause = runtime::comm::causeFromMessage(what, std::chrono::milliseconds(0));
    if (context && !context->empty() && !oom && cause != runtime::comm::stripSourceLocation(what)) {
      const std::string plain = cause == runtime::comm::kPeerClosedCause
                                    ? "the other side closed or reset the connection (is MASTER_ADDR:MASTER_PORT "
                                      "gradc's rendezvous, and is rank 0 or the launcher still running?)"
                                    : cause;
      line = gProgram + ": error: " + *context + ": " + plain + "\n";
      code = kExitUserError;
    } else {
      line = failureLine(gProgram, what.c_str(), oom);
    }
  } else {
    line = gProgram + ": error: internal: the process was stopped by std::terminate\n";
  }
  // Straight to the descriptor: the streams may be what failed.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(code);
}

// SIGBUS: a page of a memory-mapped file (a --data file, runtime/io/file_mapping.h) that no longer
// exists, because the file was truncated while in use. One line, prepared beforehand (a signal
// handler may not allocate), and exit 1.
char gBusLine[256] = {};
size_t gBusLineLength = 0;

void onBusError(int) {
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, gBusLine, gBusLineLength);
  ::_exit(kExitInternal);
}

}  // namespace

void setFailureContext(const std::string& context) { gContext.store(new std::string(context)); }

bool isOutOfMemory(const std::string& what) { return runtime::saysOutOfMemory(what); }

std::string failureLine(const std::string& program, const char* what, bool outOfMemory) {
  std::string first = what ? what : "";
  if (size_t nl = first.find('\n'); nl != std::string::npos) first.resize(nl);
  while (!first.empty() && (first.back() == ' ' || first.back() == '\r')) first.pop_back();
  if (first.empty()) first = "no description";
  if (outOfMemory)
    return program + ": error: out of memory (" + first +
           "); a smaller --budget, batch or model needs less (gradc compile --emit plan shows the peak)\n";
  return program + ": error: internal: " + first + "\n";
}

int runGuarded(const std::string& program, const std::function<int()>& command) {
  gProgram = program;
  std::set_terminate(onTerminate);
  const std::string bus = program + ": error: a memory-mapped file (a --data file) was truncated or became unreadable "
                                    "while in use; data files must not change during a run\n";
  gBusLineLength = std::min(bus.size(), sizeof gBusLine);
  std::memcpy(gBusLine, bus.data(), gBusLineLength);
  struct sigaction action {};
  action.sa_handler = onBusError;
  ::sigaction(SIGBUS, &action, nullptr);
  try {
    return command();
  } catch (...) {
    bool oom = false;
    const std::string what = describeCurrent(oom);
    std::cout.flush();
    std::cerr << failureLine(program, what.c_str(), oom);
    return kExitInternal;
  }
}

}  // namespace gradc::tools
