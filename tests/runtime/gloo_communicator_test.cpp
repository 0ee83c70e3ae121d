// GlooCommunicator across forked processes: results of every collective, failures of peers
// (exit mid-collective, stop) turned into Errors within the timeout, rendezvous timeouts.
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/mesh_groups.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <tuple>

#include "tests/runtime/dist_test_util.h"
#include "tests/temp_dir.h"

using namespace gradc;
using namespace gradc::runtime;
using namespace gradc::testing;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A rank's body: returns its report ("ok" when all is well), written to a file for the parent.
using RankBody = std::function<std::string(int rank, Communicator& comm)>;

struct RankOutcome {
  int status;
  std::string report;
};

// Forks `world` ranks (only those in `start`, default all) rendezvousing at a fresh port; each
// creates a GlooCommunicator and runs `body`. A rank that cannot create its communicator
// reports "create: <error>".
std::vector<RankOutcome> runRanks(int world, std::chrono::milliseconds timeout, const RankBody& body,
                                  std::vector<int> start = {}) {
  TempDir dir("gloo_ranks");
  const int port = freeLoopbackPort();
  if (start.empty()) {
    for (int r = 0; r < world; ++r) start.push_back(r);
  }
  std::vector<pid_t> pids;
  for (int rank : start) {
    pids.push_back(forkChild([&, rank] {
      at::set_num_threads(1);
      DistEnv env;
      env.rank = rank;
      env.worldSize = world;
      env.localRank = rank;
      env.masterAddr = "127.0.0.1";
      env.masterPort = port;
      std::string report;
      auto comm = GlooCommunicator::create(env, timeout);
      if (!comm) {
        report = "create: " + comm.error().message;
      } else {
        report = body(rank, **comm);
      }
      std::ofstream(dir / ("rank" + std::to_string(rank))) << report;
      return 0;
    }));
  }
  auto results = waitChildren(pids, timeout * 3 + 5s);
  std::vector<RankOutcome> outcomes;
  for (size_t i = 0; i < pids.size(); ++i) {
    outcomes.push_back({results[i].status, readWhole(dir / ("rank" + std::to_string(start[i])))});
  }
  return outcomes;
}

// rank r's contribution: element i is (r + 1) * (1 + i % 5).
at::Tensor contribution(int rank, int64_t n, at::ScalarType dtype) {
  return (at::arange(n, at::TensorOptions().dtype(at::kLong)).remainder(5) + 1).to(dtype) * (rank + 1);
}

at::Tensor expectedSum(int world, int64_t n, at::ScalarType dtype) {
  return (at::arange(n, at::TensorOptions().dtype(at::kLong)).remainder(5) + 1).to(dtype) * (world * (world + 1) / 2);
}

std::string expectEqual(const at::Tensor& got, const at::Tensor& want, const std::string& label) {
  if (got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() && at::equal(got, want)) return "ok";
  return label + ": wrong result";
}

}  // namespace

TEST_CASE("all_reduce sum over 2 ranks: f32 and f64 from 32 bytes to 25 MiB") {
  auto outcomes = runRanks(2, 20s, [](int rank, Communicator& comm) -> std::string {
    if (comm.rank() != rank || comm.worldSize() != 2 || comm.backend() != "gloo") return "wrong identity";
    std::string timings;
    for (auto dtype : {at::kFloat, at::kDouble}) {
      const int64_t elementSize = dtype == at::kFloat ? 4 : 8;
      for (int64_t bytes : {int64_t(4 * 8), int64_t(4000 * 8), int64_t(1) << 20, int64_t(25) << 20}) {
        const int64_t n = bytes / elementSize;
        at::Tensor buffer = contribution(rank, n, dtype);
        const auto start = Clock::now();
        auto pending = comm.startAllReduceSum(buffer, "all_reduce test");
        if (!pending) return pending.error().message;
        if (Status s = (*pending)->wait(); !s) return s.message();
        const double seconds = since(start);
        std::string check = expectEqual(buffer, expectedSum(2, n, dtype), "all_reduce of " + std::to_string(bytes));
        if (check != "ok") return check;
        if (dtype == at::kFloat && bytes >= (int64_t(1) << 20)) {
          timings += " " + std::to_string(bytes >> 20) + "MiB:" + std::to_string(seconds * 1000) + "ms";
        }
      }
    }
    return rank == 0 ? "ok" + timings : "ok";
  });
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[1].report == "ok");
  CHECK(outcomes[0].report.substr(0, 2) == "ok");
  MESSAGE("all_reduce timings on rank 0 (f32):" << outcomes[0].report.substr(2));
  for (auto& o : outcomes) CHECK(o.status == 0);
}

TEST_CASE("two pending all_reduces waited in reverse order") {
  auto outcomes = runRanks(2, 10s, [](int rank, Communicator& comm) -> std::string {
    at::Tensor a = contribution(rank, 100000, at::kFloat);
    at::Tensor b = contribution(rank, 3000, at::kDouble) * 10;
    auto pa = comm.startAllReduceSum(a, "bucket 0");
    auto pb = comm.startAllReduceSum(b, "bucket 1");
    if (!pa || !pb) return "start failed";
    if (Status s = (*pb)->wait(); !s) return s.message();
    if (Status s = (*pa)->wait(); !s) return s.message();
    if (expectEqual(a, expectedSum(2, 100000, at::kFloat), "a") != "ok") return "a wrong";
    return expectEqual(b, expectedSum(2, 3000, at::kDouble) * 10, "b");
  });
  for (auto& o : outcomes) {
    CHECK(o.report == "ok");
    CHECK(o.status == 0);
  }
}

TEST_CASE("gather scatter all_gather broadcast and barrier over 3 ranks") {
  auto outcomes = runRanks(3, 10s, [](int rank, Communicator& comm) -> std::string {
    const int world = 3;
    auto rows = [](int r) { return at::full({2, 3}, double(r + 1), at::kDouble) + at::arange(3, at::kDouble); };
    at::Tensor all = at::cat(std::vector<at::Tensor>{rows(0), rows(1), rows(2)});

    // gather to root 1
    at::Tensor gathered = rank == 1 ? at::zeros({6, 3}, at::kDouble) : at::Tensor();
    if (Status s = comm.gather(rows(rank), gathered, 1, "gather test"); !s) return s.message();
    if (rank == 1 && !at::equal(gathered, all)) return "gather wrong";

    // scatter from root 2
    at::Tensor mine = at::zeros({2, 3}, at::kDouble);
    if (Status s = comm.scatter(rank == 2 ? all : at::Tensor(), mine, 2, "scatter test"); !s) return s.message();
    if (!at::equal(mine, rows(rank))) return "scatter wrong";

    // all_gather
    at::Tensor everyone = at::zeros({6, 3}, at::kDouble);
    if (Status s = comm.allGather(rows(rank), everyone, "all_gather test"); !s) return s.message();
    if (!at::equal(everyone, all)) return "all_gather wrong";

    // broadcast from root 0, f32
    at::Tensor value = rank == 0 ? at::arange(1000, at::kFloat) : at::zeros({1000}, at::kFloat);
    if (Status s = comm.broadcast(value, 0, "broadcast test"); !s) return s.message();
    if (!at::equal(value, at::arange(1000, at::kFloat))) return "broadcast wrong";

    if (Status s = comm.barrier("barrier test"); !s) return s.message();

    // Mistakes in arguments are Errors, not crashes, and leave the communicator usable.
    at::Tensor strided = at::zeros({4, 4}).t();
    auto bad = comm.startAllReduceSum(strided, "bad all_reduce");
    if (bad.ok() || bad.error().message != "rank " + std::to_string(rank) + ": bad all_reduce: the buffer is not contiguous")
      return "bad all_reduce accepted or misworded: " + (bad.ok() ? std::string("accepted") : bad.error().message);
    if (rank == 0) {
      Status s = comm.gather(rows(0), at::zeros({5, 3}, at::kDouble), 0, "bad gather");
      if (s.ok() || s.message().find("the output has shape [5, 3]") == std::string::npos) return "bad gather: " + s.message();
    }
    Status s = comm.broadcast(value, world, "bad broadcast");
    if (s.ok() || s.message().find("root 3 is not a rank") == std::string::npos) return "bad broadcast";
    if (Status again = comm.barrier("final barrier"); !again) return again.message();
    return "ok";
  });
  for (auto& o : outcomes) {
    CHECK(o.report == "ok");
    CHECK(o.status == 0);
  }
}

TEST_CASE("the groups of a dp=2,tp=2 mesh: each sums over its own members, and ranks are positions in the group") {
  auto outcomes = runRanks(4, 10s, [](int rank, Communicator& world) -> std::string {
    Expected<MeshGroups> groups = MeshGroups::join(world, ir::DeviceMesh::parse("dp=2,tp=2").value());
    if (!groups) return "join: " + groups.error().message;
    Communicator* tp = groups->group("tp");
    Communicator* dp = groups->group("dp");
    if (!tp || !dp || groups->group("pp")) return "groups missing";
    // Row-major, tp innermost: tp groups {0, 1} and {2, 3}, dp groups {0, 2} and {1, 3}.
    if (tp->worldSize() != 2 || tp->rank() != rank % 2) return "tp rank " + std::to_string(tp->rank());
    if (dp->worldSize() != 2 || dp->rank() != rank / 2) return "dp rank " + std::to_string(dp->rank());
    const std::vector<int> tpPeer{1, 0, 3, 2}, dpPeer{2, 3, 0, 1};
    for (auto [name, comm, peer] : {std::tuple{"tp", tp, tpPeer[static_cast<size_t>(rank)]},
                                    std::tuple{"dp", dp, dpPeer[static_cast<size_t>(rank)]}}) {
      at::Tensor sum = at::full({1000}, double(1 << rank), at::kDouble);
      auto started = comm->startAllReduceSum(sum, std::string(name) + " all_reduce");
      if (!started) return started.error().message;
      if (Status s = (*started)->wait(); !s) return s.message();
      if (!at::equal(sum, at::full({1000}, double((1 << rank) + (1 << peer)), at::kDouble)))
        return std::string(name) + " sum wrong: " + std::to_string(sum[0].item<double>());
      at::Tensor both = at::zeros({2}, at::kDouble);
      if (Status s = comm->allGather(at::full({1}, double(rank), at::kDouble), both, std::string(name) + " gather"); !s)
        return s.message();
      const double first = std::min(rank, peer), second = std::max(rank, peer);
      if (both[0].item<double>() != first || both[1].item<double>() != second) return std::string(name) + " order";
    }
    // Interleaved collectives on the two groups and the world do not cross.
    at::Tensor all = at::ones({8}, at::kFloat);
    if (Status s = (*world.startAllReduceSum(all, "world all_reduce"))->wait(); !s) return s.message();
    if (!at::equal(all, at::full({8}, 4.0f, at::kFloat))) return "world sum wrong";
    // A member list without this rank is refused, naming the run's rank.
    auto bad = world.subgroup("x/0", rank < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1});
    if (bad.ok() || bad.error().message.find("rank " + std::to_string(rank) + ": ") != 0 ||
        bad.error().message.find("is not one of its members") == std::string::npos)
      return "foreign group: " + (bad.ok() ? std::string("accepted") : bad.error().message);
    if (Status s = world.barrier("final barrier"); !s) return s.message();
    return "ok";
  });
  for (auto& o : outcomes) {
    CHECK(o.report == "ok");
    CHECK(o.status == 0);
  }
  // A mesh of another size than the run is refused before any rendezvous.
  auto wrong = runRanks(2, 10s, [](int, Communicator& world) -> std::string {
    Expected<MeshGroups> groups = MeshGroups::join(world, ir::DeviceMesh::parse("dp=2,tp=2").value());
    return groups ? "accepted" : groups.error().message;
  });
  for (auto& o : wrong) CHECK(o.report == "the mesh dp=2,tp=2 has 4 ranks, but the run has 2");
}

TEST_CASE("a peer that exits mid-collective gives an Error naming the rank and the collective well within the timeout") {
  auto outcomes = runRanks(2, 5s, [](int rank, Communicator& comm) -> std::string {
    at::Tensor warm = contribution(rank, 1000, at::kFloat);
    if (Status s = (*comm.startAllReduceSum(warm, "warm-up"))->wait(); !s) return s.message();
    at::Tensor big = contribution(rank, int64_t(25) << 18, at::kFloat);  // 25 MiB
    if (rank == 1) {
      auto pending = comm.startAllReduceSum(big, "all_reduce of gradient bucket 2 at step 7");
      std::fflush(nullptr);
      ::_exit(3);  // dies with the collective in flight
    }
    const auto start = Clock::now();
    auto pending = comm.startAllReduceSum(big, "all_reduce of gradient bucket 2 at step 7");
    if (!pending) return "start: " + pending.error().message;
    Status s = (*pending)->wait();
    const double seconds = since(start);
    if (s.ok()) return "no error";
    return s.message() + "|" + std::to_string(seconds);
  });
  REQUIRE(outcomes.size() == 2);
  const std::string& report = outcomes[0].report;
  INFO(report);
  auto bar = report.rfind('|');
  REQUIRE(bar != std::string::npos);
  const std::string message = report.substr(0, bar);
  const double seconds = std::stod(report.substr(bar + 1));
  CHECK(message.find("rank 0: all_reduce of gradient bucket 2 at step 7 failed after ") == 0);
  CHECK(message.find("a peer rank exited or was killed (connection closed)") != std::string::npos);
  CHECK(seconds < 2.0);
  MESSAGE("peer exited: error after " << seconds << " s: " << message);
  CHECK(WIFEXITED(outcomes[1].status));
  CHECK(WEXITSTATUS(outcomes[1].status) == 3);
}

TEST_CASE("a peer that stops answering (SIGSTOP) gives a timeout Error after about the timeout") {
  auto outcomes = runRanks(2, 2s, [](int rank, Communicator& comm) -> std::string {
    at::Tensor buffer = contribution(rank, 10000, at::kFloat);
    if (Status s = (*comm.startAllReduceSum(buffer, "warm-up"))->wait(); !s) return s.message();
    if (rank == 1) ::raise(SIGSTOP);  // the parent kills it once rank 0 is done
    const auto start = Clock::now();
    Status s = comm.barrier("barrier before step 3");
    const double seconds = since(start);
    if (s.ok()) return "no error";
    return s.message() + "|" + std::to_string(seconds);
  });
  const std::string& report = outcomes[0].report;
  INFO(report);
  auto bar = report.rfind('|');
  REQUIRE(bar != std::string::npos);
  const double seconds = std::stod(report.substr(bar + 1));
  CHECK(report.find("rank 0: barrier before step 3 failed after 2") == 0);
  CHECK(report.find("no answer within the 2 s timeout; a peer rank stopped answering or died") != std::string::npos);
  CHECK(seconds > 1.8);
  CHECK(seconds < 3.5);
  MESSAGE("peer stopped: error after " << seconds << " s: " << report.substr(0, bar));
}

TEST_CASE("rendezvous with a missing rank times out with a clear Error") {
  const auto start = Clock::now();
  auto outcomes = runRanks(2, 2s, [](int, Communicator&) -> std::string { return "joined?"; }, {0});
  REQUIRE(outcomes.size() == 1);
  INFO(outcomes[0].report);
  CHECK(outcomes[0].report.find("create: rank 0: rendezvous of 2 ranks at 127.0.0.1:") == 0);
  CHECK(outcomes[0].report.find("not every rank joined within the 2 s timeout") != std::string::npos);
  CHECK(since(start) < 5.0);

  // A client rank with nothing at the address at all.
  outcomes = runRanks(2, 2s, [](int, Communicator&) -> std::string { return "joined?"; }, {1});
  INFO(outcomes[0].report);
  CHECK(outcomes[0].report.find("create: rank 1: connecting to the rendezvous store at 127.0.0.1:") == 0);
}
