// Starts and supervises one worker process per device, on this host.
//
// The launcher hosts the rendezvous store itself (a c10d::TCPStore on a free port that the
// kernel picks, so there is no race for the port) and starts `devices` workers with fork +
// exec, each with
//   RANK, LOCAL_RANK   0 .. devices-1
//   WORLD_SIZE         devices
//   MASTER_ADDR        127.0.0.1
//   MASTER_PORT        the store's port
//   GRADC_LAUNCHED     1 (so the workers know the store is hosted for them: runtime/comm/dist_env.h)
//   GRADC_COMM_TIMEOUT_MS  the timeout, for the workers' communicators
//   LOCAL_WORLD_SIZE   devices
//   OMP_NUM_THREADS    cores / devices (at least 1), unless set already: the workers share the cores
// Each worker gets PR_SET_PDEATHSIG(SIGKILL), so no worker outlives the launcher (even one
// killed with SIGKILL). With quietOtherRanks, ranks other than 0 write stdout to /dev/null;
// every rank keeps stderr, so their errors are seen.
//
// Failure: when a worker exits non-zero or is killed by a signal, the launcher prints one line
//   gradc: rank 1 (pid 4242) exited with code 3
//   gradc: rank 1 (pid 4242) was killed by signal SIGKILL
// to stderr, gives the others `gracePeriod` to finish or to report their own collective error,
// then sends SIGTERM (and SIGCONT, so a stopped worker acts on it), and SIGKILL `gracePeriod`
// later. It returns only when every worker has been reaped. SIGINT or SIGTERM sent to the
// launcher is forwarded to every worker (a second one sends SIGKILL), and the launcher returns
// 130 or 143 once they are gone.
//
// Call it from the main thread (PR_SET_PDEATHSIG follows the thread that forks). It installs
// handlers for SIGINT, SIGTERM and SIGCHLD while it runs and restores the previous ones.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace gradc::runtime {

struct LaunchOptions {
  int devices = 1;
  std::vector<std::string> argv;  // the worker command; argv[0] is a path or a name in PATH
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // store and communicator timeout
  bool quietOtherRanks = true;
  std::chrono::milliseconds gracePeriod{std::chrono::seconds(5)};
  // Called with (rank, pid) after each worker has started; for tests and logging.
  std::function<void(int rank, pid_t pid)> onStart;
};

// A worker killed by a signal is a failed rank: exit 2, what a rank that reports its peer's
// failure exits with (docs/reliability.md).
inline constexpr int kFailedRankExit = 2;

// The exit code for the launcher process: 0 when every worker exited 0; the first failure's
// exit code (kFailedRankExit for a worker killed by a signal); 130 / 143 after SIGINT /
// SIGTERM; 1 when the workers could not be started (with a message on stderr).
int launchWorkers(const LaunchOptions& options);

}  // namespace gradc::runtime
