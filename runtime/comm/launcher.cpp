#include "runtime/comm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <optional>
#include <string_view>
#include <thread>

#include "runtime/comm/tcp_kv_store.h"
#include "runtime/core/cpu_cores.h"

extern char** environ;

namespace gradc::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Written by the signal handler, read by the supervision loop.
int gWakeFd = -1;
volatile sig_atomic_t gLastSignal = 0;
volatile sig_atomic_t gSignalCount = 0;

void onSignal(int sig) {
  const int savedErrno = errno;
  if (sig == SIGINT || sig == SIGTERM) {
    gLastSignal = sig;
    gSignalCount = gSignalCount + 1;
  }
  if (gWakeFd >= 0) {
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(gWakeFd, &byte, 1);
  }
  errno = savedErrno;
}

// Installs the handlers for SIGINT, SIGTERM and SIGCHLD, and restores the previous ones (and
// closes the wake-up pipe) on destruction.
class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return;
    gWakeFd = pipe_[1];
    gLastSignal = 0;
    gSignalCount = 0;
    struct sigaction action {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
    ok_ = true;
  }
  ~SignalScope() {
    if (ok_) {
      for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    }
    gWakeFd = -1;
    for (int fd : pipe_) {
      if (fd >= 0) ::close(fd);
    }
  }
  bool ok() const { return ok_; }
  int readFd() const { return pipe_[0]; }
  void drain() const {
    char buf[64];
    while (::read(pipe_[0], buf, sizeof buf) > 0) {
    }
  }

  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGCHLD};

 private:
  int pipe_[2] = {-1, -1};
  struct sigaction previous_[3] {};
  bool ok_ = false;
};

// argv[0] as a path: itself when it contains '/', else the first executable match in PATH.
std::optional<std::string> resolveExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos) return std::nullopt;
    dirs.remove_prefix(colon + 1);
  }
}

// The environment of one worker: ours, minus the variables the launcher sets, plus those.
std::vector<std::string> workerEnvironment(int rank, int world, int port, std::chrono::milliseconds timeout) {
  static constexpr std::string_view kOwned[] = {"RANK=",        "WORLD_SIZE=",     "LOCAL_RANK=",
                                                "MASTER_ADDR=", "MASTER_PORT=",    "GRADC_LAUNCHED=",
                                                "GRADC_COMM_TIMEOUT_MS=", "TORCHELASTIC_USE_AGENT_STORE=",
                                                "LOCAL_WORLD_SIZE="};
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view var(*entry);
    bool owned = false;
    for (auto prefix : kOwned) owned = owned || var.substr(0, prefix.size()) == prefix;
    if (!owned) env.emplace_back(var);
  }
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("LOCAL_RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world));
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back("GRADC_LAUNCHED=1");
  env.push_back("GRADC_COMM_TIMEOUT_MS=" + std::to_string(timeout.count()));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(world));
  // The cores are shared by the workers: each gets its share of intra-op threads (as torchrun
  // does), unless the caller chose a count.
  if (!std::getenv("OMP_NUM_THREADS")) {
    env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, availableCores() / world)));
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void writeAll(int fd, const char* text) {
  size_t len = std::strlen(text);
  while (len > 0) {
    ssize_t n = ::write(fd, text, len);
    if (n <= 0) return;
    text += n;
    len -= static_cast<size_t>(n);
  }
}

struct Worker {
  int rank;
  pid_t pid;
  bool alive = true;
};

}  // namespace

int launchWorkers(const LaunchOptions& options) {
  if (options.devices < 1) {
    std::fprintf(stderr, "gradc: launch needs at least one device (got %d)\n", options.devices);
    return 1;
  }
  if (options.argv.empty()) {
    std::fprintf(stderr, "gradc: launch needs a worker command\n");
    return 1;
  }
  auto executable = resolveExecutable(options.argv[0]);
  if (!executable) {
    std::fprintf(stderr, "gradc: cannot run '%s': %s\n", options.argv[0].c_str(),
                 options.argv[0].find('/') != std::string::npos ? "not an executable file" : "not found in PATH");
    return 1;
  }

  SignalScope signals;
  if (!signals.ok()) {
    std::fprintf(stderr, "gradc: cannot create a pipe: %s\n", std::strerror(errno));
    return 1;
  }
  auto store = hostTcpStore(0, options.timeout);
  if (!store) {
    std::fprintf(stderr, "gradc: %s\n", store.error().message.c_str());
    return 1;
  }
  const int port = (*store)->getPort();

  // Everything the children need is prepared before fork: between fork and exec a child of a
  // multi-threaded process may only make async-signal-safe calls.
  std::vector<std::string> argvStrings = options.argv;
  std::vector<char*> argvPtrs = pointers(argvStrings);
  std::vector<std::vector<std::string>> envStrings;
  std::vector<std::vector<char*>> envPtrs;
  for (int rank = 0; rank < options.devices; ++rank)
    envStrings.push_back(workerEnvironment(rank, options.devices, port, options.timeout));
  for (auto& env : envStrings) envPtrs.push_back(pointers(env));
  const int devNull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const std::string execFailed = "gradc: cannot execute '" + *executable + "'\n";
  const pid_t launcherPid = ::getpid();

  std::vector<Worker> workers;
  for (int rank = 0; rank < options.devices; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig : SignalScope::kSignals) ::sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcherPid) ::_exit(1);  // the launcher died before prctl took effect
      if (options.quietOtherRanks && rank != 0 && devNull >= 0) ::dup2(devNull, STDOUT_FILENO);
      ::execve(executable->c_str(), argvPtrs.data(), envPtrs[rank].data());
      writeAll(STDERR_FILENO, execFailed.c_str());
      ::_exit(127);
    }
    if (pid < 0) {
      std::fprintf(stderr, "gradc: cannot start rank %d: fork failed: %s\n", rank, std::strerror(errno));
      for (auto& w : workers) ::kill(w.pid, SIGKILL);
      for (auto& w : workers) ::waitpid(w.pid, nullptr, 0);
      if (devNull >= 0) ::close(devNull);
      return 1;
    }
    workers.push_back({rank, pid});
  }
  if (devNull >= 0) ::close(devNull);
  if (options.onStart) {
    for (auto& w : workers) options.onStart(w.rank, w.pid);
  }

  enum class Phase { Running, Grace, Terminated, Killed };
  Phase phase = Phase::Running;
  Clock::time_point deadline{};
  int exitCode = 0;
  bool failed = false;
  int interruptedBy = 0;
  int signalsHandled = 0;
  int alive = options.devices;

  auto signalAll = [&](int sig) {
    for (auto& w : workers) {
      if (w.alive) ::kill(w.pid, sig);
    }
  };

  while (alive > 0) {
    // Reap whoever has exited.
    for (auto& w : workers) {
      if (!w.alive) continue;
      int status = 0;
      pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == 0) continue;
      if (r < 0 && errno == EINTR) continue;
      w.alive = false;
      --alive;
      if (r < 0) continue;  // reaped elsewhere: nothing to report
      const bool bad = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
      if (bad && !failed && interruptedBy == 0) {
        failed = true;
        if (WIFSIGNALED(status)) {
          // A failed rank is exit 2, as a rank that reports its peer's failure exits (docs/reliability.md);
          // 128 + N is kept for the launcher itself stopped by signal N.
          exitCode = kFailedRankExit;
          std::fprintf(stderr, "gradc: rank %d (pid %d) was killed by signal %s\n", w.rank, static_cast<int>(w.pid),
                       signalName(WTERMSIG(status)).c_str());
        } else {
          exitCode = WEXITSTATUS(status);
          std::fprintf(stderr, "gradc: rank %d (pid %d) exited with code %d\n", w.rank, static_cast<int>(w.pid),
                       exitCode);
        }
        std::fflush(stderr);
        if (phase == Phase::Running) {
          phase = Phase::Grace;
          deadline = Clock::now() + options.gracePeriod;
        }
      }
    }
    if (alive == 0) break;

    // Signals to the launcher: forward the first, SIGKILL on the second.
    const int count = gSignalCount;
    if (count > signalsHandled) {
      signalsHandled = count;
      const int sig = gLastSignal;
      if (interruptedBy == 0) {
        interruptedBy = sig;
        signalAll(sig);
        phase = Phase::Terminated;
        deadline = Clock::now() + options.gracePeriod;
      } else {
        signalAll(SIGKILL);
        phase = Phase::Killed;
      }
      continue;
    }

    // Escalation after a failure.
    const auto now = Clock::now();
    if ((phase == Phase::Grace || phase == Phase::Terminated) && now >= deadline) {
      if (phase == Phase::Grace) {
        std::fprintf(stderr, "gradc: stopping the %d remaining rank%s (SIGTERM)\n", alive, alive == 1 ? "" : "s");
        std::fflush(stderr);
        signalAll(SIGTERM);
        signalAll(SIGCONT);  // a stopped rank acts on SIGTERM only once it runs again
        phase = Phase::Terminated;
        deadline = now + options.gracePeriod;
      } else {
        signalAll(SIGKILL);
        phase = Phase::Killed;
      }
      continue;
    }

    // Sleep until a signal (SIGCHLD included) or the next deadline; poll also rechecks every
    // 200 ms, so a SIGCHLD that raced with the handler setup is never missed for long.
    int waitMs = 200;
    if (phase == Phase::Grace || phase == Phase::Terminated) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      waitMs = static_cast<int>(std::min<long long>(waitMs, std::max<long long>(left, 0)));
    }
    struct pollfd pfd {signals.readFd(), POLLIN, 0};
    ::poll(&pfd, 1, waitMs);
    signals.drain();
  }

  if (interruptedBy != 0) return 128 + interruptedBy;
  return exitCode;
}

}  // namespace gradc::runtime
