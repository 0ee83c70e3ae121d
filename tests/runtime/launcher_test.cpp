// The launcher: environment of the workers, exit codes, failure lines, clean-up of every worker
// (after a failure, after SIGINT, after the launcher itself is killed), and a real Gloo run
// through the launcher's store.
#include "runtime/comm/launcher.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <limits.h>

#include <chrono>
#include <csignal>

#include "runtime/comm/dist_env.h"
#include "runtime/comm/gloo_communicator.h"
#include "tests/runtime/dist_test_util.h"
#include "tests/temp_dir.h"

using namespace gradc;
using namespace gradc::runtime;
using namespace gradc::testing;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// Runs launchWorkers in a forked child (so its store and signal handlers stay out of the test
// process) with stdout and stderr going to files in `dir`. Returns the child's pid.
pid_t startLauncher(const TempDir& dir, LaunchOptions options) {
  return forkChild([&dir, options]() mutable {
    int out = ::open((dir / "launcher.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open((dir / "launcher.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    return launchWorkers(options);
  });
}

int exitCodeOf(pid_t pid, std::chrono::milliseconds limit) {
  auto result = waitChildren({pid}, limit);
  if (result[0].killedAtLimit) return -1000;
  return WIFEXITED(result[0].status) ? WEXITSTATUS(result[0].status) : -WTERMSIG(result[0].status);
}

LaunchOptions shell(int devices, const std::string& script) {
  LaunchOptions options;
  options.devices = devices;
  options.argv = {"/bin/sh", "-c", script};
  options.timeout = 5s;
  options.gracePeriod = 500ms;
  return options;
}

// Waits until every rank has written its pid file; returns the pids.
std::vector<pid_t> workerPids(const TempDir& dir, int devices, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  std::vector<pid_t> pids;
  while (Clock::now() < end) {
    pids.clear();
    for (int r = 0; r < devices; ++r) {
      std::string text = readWhole(dir / ("pid" + std::to_string(r)));
      if (text.empty() || text.back() != '\n') break;
      pids.push_back(std::stoi(text));
    }
    if (static_cast<int>(pids.size()) == devices) return pids;
    std::this_thread::sleep_for(10ms);
  }
  return pids;
}

std::string selfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

}  // namespace

TEST_CASE("launcher: every worker exits 0 so the launcher returns 0 and the workers see the distributed environment") {
  TempDir dir("launch_ok");
  auto options = shell(3, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $GRADC_LAUNCHED $GRADC_COMM_TIMEOUT_MS\" > " +
                              dir.path.string() + "/env$RANK; echo \"stdout of rank $RANK\"; echo \"stderr of rank $RANK\" >&2");
  const pid_t launcher = startLauncher(dir, options);
  CHECK(exitCodeOf(launcher, 10s) == 0);
  for (int r = 0; r < 3; ++r) {
    std::string r_ = std::to_string(r);
    CHECK(readWhole(dir / ("env" + r_)) == r_ + " 3 " + r_ + " 127.0.0.1 1 5000\n");
    CHECK(readWhole(dir / "launcher.err").find("stderr of rank " + r_) != std::string::npos);
  }
  // quietOtherRanks: only rank 0's stdout is kept.
  CHECK(readWhole(dir / "launcher.out") == "stdout of rank 0\n");

  options.quietOtherRanks = false;
  CHECK(exitCodeOf(startLauncher(dir, options), 10s) == 0);
  CHECK(readWhole(dir / "launcher.out").find("stdout of rank 2") != std::string::npos);
}

TEST_CASE("launcher: a killed worker gives exit 2 and one line naming it and the others are stopped with nothing left behind") {
  TempDir dir("launch_kill");
  const std::string d = dir.path.string();
  // Rank 1 kills itself; the others sleep (exec, so the pid written is the sleeping process).
  auto options = shell(3, "echo $$ > " + d + "/pid$RANK; if [ \"$RANK\" = 1 ]; then sleep 0.3; kill -9 $$; fi; exec sleep 30");
  const auto start = Clock::now();
  const pid_t launcher = startLauncher(dir, options);
  auto pids = workerPids(dir, 3, 5s);
  REQUIRE(pids.size() == 3);
  CHECK(exitCodeOf(launcher, 10s) == kFailedRankExit);  // a failed rank, as docs/reliability.md says
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 5.0);
  const std::string err = readWhole(dir / "launcher.err");
  CHECK(err.find("gradc: rank 1 (pid " + std::to_string(pids[1]) + ") was killed by signal SIGKILL\n") != std::string::npos);
  CHECK(err.find("gradc: stopping the 2 remaining ranks (SIGTERM)") != std::string::npos);
  CHECK(allGoneWithin(pids, 2s));
}

TEST_CASE("launcher: a worker exiting with code 3 gives 3") {
  TempDir dir("launch_code");
  const std::string d = dir.path.string();
  auto options = shell(2, "echo $$ > " + d + "/pid$RANK; if [ \"$RANK\" = 0 ]; then exit 3; fi; exec sleep 30");
  const pid_t launcher = startLauncher(dir, options);
  auto pids = workerPids(dir, 2, 5s);
  CHECK(exitCodeOf(launcher, 10s) == 3);
  CHECK(readWhole(dir / "launcher.err").find("gradc: rank 0 (pid ") != std::string::npos);
  CHECK(readWhole(dir / "launcher.err").find(") exited with code 3\n") != std::string::npos);
  CHECK(allGoneWithin(pids, 2s));

  // A command that cannot be run.
  LaunchOptions bad = shell(2, "");
  bad.argv = {"/nonexistent/worker"};
  CHECK(exitCodeOf(startLauncher(dir, bad), 5s) == 1);
  CHECK(readWhole(dir / "launcher.err").find("cannot run '/nonexistent/worker'") != std::string::npos);
}

TEST_CASE("launcher: SIGINT and SIGTERM are forwarded and give 130 and 143 once the workers are gone") {
  for (int sig : {SIGINT, SIGTERM}) {
    TempDir dir("launch_sig");
    auto options = shell(2, "echo $$ > " + dir.path.string() + "/pid$RANK; exec sleep 30");
    options.gracePeriod = 5s;  // the workers must stop because of the forwarded signal, not escalation
    const auto start = Clock::now();
    const pid_t launcher = startLauncher(dir, options);
    auto pids = workerPids(dir, 2, 5s);
    REQUIRE(pids.size() == 2);
    ::kill(launcher, sig);
    CHECK(exitCodeOf(launcher, 10s) == 128 + sig);
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 4.0);
    CHECK(allGoneWithin(pids, 1s));
  }
}

TEST_CASE("launcher: workers die with the launcher (PR_SET_PDEATHSIG)") {
  TempDir dir("launch_death");
  auto options = shell(2, "echo $$ > " + dir.path.string() + "/pid$RANK; exec sleep 30");
  const pid_t launcher = startLauncher(dir, options);
  auto pids = workerPids(dir, 2, 5s);
  REQUIRE(pids.size() == 2);
  ::kill(launcher, SIGKILL);
  (void)exitCodeOf(launcher, 5s);
  CHECK(allGoneWithin(pids, 3s));
}

// The worker side of the next test: does nothing unless started by the launcher.
TEST_CASE("dist worker: all_reduce through the launcher's store") {
  auto env = distEnvFromEnvironment();
  REQUIRE(env.ok());
  if (!env->has_value() || std::getenv("GRADC_DIST_TEST_WORKER") == nullptr) return;
  const DistEnv& e = **env;
  REQUIRE(e.storeHostedByLauncher);
  auto comm = GlooCommunicator::create(e, 5s);
  REQUIRE_MESSAGE(comm.ok(), comm.error().message);
  at::Tensor buffer = at::full({1000}, double(e.rank + 1), at::kDouble);
  auto pending = (*comm)->startAllReduceSum(buffer, "all_reduce through the launcher");
  REQUIRE(pending.ok());
  Status s = (*pending)->wait();
  REQUIRE_MESSAGE(s.ok(), s.message());
  const double expected = e.worldSize * (e.worldSize + 1) / 2.0;
  CHECK(at::equal(buffer, at::full({1000}, expected, at::kDouble)));
}

TEST_CASE("launcher: Gloo ranks rendezvous through the launcher's store") {
  TempDir dir("launch_gloo");
  LaunchOptions options;
  options.devices = 3;
  options.argv = {selfExe(), "--test-case=dist worker: all_reduce through the launcher's store"};
  options.timeout = 5s;
  options.gracePeriod = 1s;
  ::setenv("GRADC_DIST_TEST_WORKER", "1", 1);
  const pid_t launcher = startLauncher(dir, options);
  ::unsetenv("GRADC_DIST_TEST_WORKER");
  const int code = exitCodeOf(launcher, 20s);
  INFO(readWhole(dir / "launcher.err"));
  INFO(readWhole(dir / "launcher.out"));
  CHECK(code == 0);
  // doctest's summary of rank 0 shows the worker case ran with its assertions.
  CHECK(readWhole(dir / "launcher.out").find("1 passed") != std::string::npos);
}
