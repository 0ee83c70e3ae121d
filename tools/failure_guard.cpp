#include "tools/failure_guard.h"

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "runtime/comm_error.h"
#include "tools/commands.h"

namespace gradc::tools {

namespace {

std::string gProgram = "gradc";
std::string gContext;  // set by the main thread before the threads it concerns exist

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
    if (!gContext.empty() && !oom) {
      std::string cause = runtime::comm::causeFromMessage(what, std::chrono::milliseconds(0));
      if (cause == runtime::comm::kPeerClosedCause)
        cause = "the other side closed or reset the connection (is MASTER_ADDR:MASTER_PORT gradc's rendezvous, "
                "and is rank 0 or the launcher still running?)";
      line = gProgram + ": error: " + gContext + ": " + cause + "\n";
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

}  // namespace

void setFailureContext(const std::string& context) { gContext = context; }

bool isOutOfMemory(const std::string& what) {
  for (const char* sign : {"not enough memory", "out of memory", "Cannot allocate memory", "bad_alloc"})
    if (what.find(sign) != std::string::npos) return true;
  return false;
}

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
