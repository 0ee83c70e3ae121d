// Helpers for multi-process tests: free ports, forked ranks, process checks.
//
// Ranks are forked from the test process without exec, so the test process itself must stay
// single-threaded: it never creates a communicator, a store or an ATen thread pool; only the
// children do.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gradc::testing {

// A TCP port that was free a moment ago (the kernel's pick for port 0 on loopback).
inline int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline std::string readWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True when `pid` no longer exists (or is a zombie nobody reaped yet).
inline bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close == std::string::npos || (close + 2 < text.size() && text[close + 2] == 'Z');
}

// Polls until every pid is gone or `limit` passes.
inline bool allGoneWithin(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (true) {
    bool all = true;
    for (pid_t p : pids) all = all && processGone(p);
    if (all) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct ChildResult {
  int status = -1;         // as from waitpid; -1 when it had to be killed at the hard limit
  bool killedAtLimit = false;
};

// Waits for `pids`; a child that is stopped while every other has exited, or that is still
// running at `hardLimit`, is killed (so a broken test never hangs).
inline std::vector<ChildResult> waitChildren(const std::vector<pid_t>& pids, std::chrono::milliseconds hardLimit) {
  std::vector<ChildResult> results(pids.size());
  std::vector<bool> done(pids.size(), false), stopped(pids.size(), false);
  const auto end = std::chrono::steady_clock::now() + hardLimit;
  size_t remaining = pids.size();
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = ::waitpid(pids[i], &status, WNOHANG | WUNTRACED);
      if (r == pids[i] && WIFSTOPPED(status)) {
        stopped[i] = true;
      } else if (r == pids[i]) {
        results[i].status = status;
        done[i] = true;
        --remaining;
      }
    }
    size_t stoppedCount = 0;
    for (size_t i = 0; i < pids.size(); ++i) stoppedCount += (!done[i] && stopped[i]);
    const bool limit = std::chrono::steady_clock::now() >= end;
    if (remaining > 0 && (stoppedCount == remaining || limit)) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        results[i].killedAtLimit = limit;
        ::kill(pids[i], SIGKILL);
        ::kill(pids[i], SIGCONT);
        ::waitpid(pids[i], &results[i].status, 0);
        done[i] = true;
      }
      remaining = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return results;
}

// Runs `body` in a forked child; returns its pid. The child exits with body's return value.
inline pid_t forkChild(const std::function<int()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 99;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  return pid;
}

}  // namespace gradc::testing
