// The distributed environment from torchrun-style and Slurm variables, and its errors.
#include "runtime/comm/dist_env.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace gradc::runtime;

namespace {

using Vars = std::map<std::string, std::string>;

gradc::Expected<std::optional<DistEnv>> parse(const Vars& vars) {
  return distEnvFromVariables([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string errorOf(const Vars& vars) {
  auto env = parse(vars);
  REQUIRE_FALSE(env.ok());
  return env.error().message;
}

const Vars kTorchrun = {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                        {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29500"}};

}  // namespace

TEST_CASE("no distributed variables: a single-process run") {
  auto env = parse({});
  REQUIRE(env.ok());
  CHECK_FALSE(env->has_value());
  // MASTER_* alone does not make a distributed run.
  env = parse({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  REQUIRE(env.ok());
  CHECK_FALSE(env->has_value());
}

TEST_CASE("torchrun-style variables") {
  auto env = parse(kTorchrun);
  REQUIRE(env.ok());
  REQUIRE(env->has_value());
  const DistEnv& e = **env;
  CHECK(e.rank == 1);
  CHECK(e.worldSize == 4);
  CHECK(e.localRank == 1);
  CHECK(e.masterAddr == "10.0.0.5");
  CHECK(e.masterPort == 29500);
  CHECK_FALSE(e.storeHostedByLauncher);

  Vars launched = kTorchrun;
  launched["GRADC_LAUNCHED"] = "1";
  CHECK((*parse(launched))->storeHostedByLauncher);
  Vars agent = kTorchrun;
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  CHECK((*parse(agent))->storeHostedByLauncher);

  Vars noLocal = kTorchrun;
  noLocal.erase("LOCAL_RANK");
  CHECK((*parse(noLocal))->localRank == 1);  // defaults to the rank
}

TEST_CASE("Slurm variables with MASTER_ADDR and MASTER_PORT") {
  Vars slurm = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}};
  auto env = parse(slurm);
  REQUIRE(env.ok());
  REQUIRE(env->has_value());
  CHECK((*env)->rank == 3);
  CHECK((*env)->worldSize == 8);
  CHECK((*env)->localRank == 1);
  CHECK((*env)->masterAddr == "node7");

  // RANK and WORLD_SIZE win over Slurm's.
  Vars both = slurm;
  both["RANK"] = "0";
  both["WORLD_SIZE"] = "2";
  both["LOCAL_RANK"] = "0";
  CHECK((*parse(both))->worldSize == 2);

  // One Slurm task without a rendezvous address is a plain job.
  auto single = parse({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}});
  REQUIRE(single.ok());
  CHECK_FALSE(single->has_value());

  slurm.erase("MASTER_PORT");
  CHECK(errorOf(slurm).find("MASTER_PORT is not set (SLURM_PROCID=3 is)") == 0);
}

TEST_CASE("missing and invalid variables are named") {
  Vars v = kTorchrun;
  v.erase("WORLD_SIZE");
  CHECK(errorOf(v).find("WORLD_SIZE is not set (RANK=1 is)") == 0);

  v = kTorchrun;
  v.erase("RANK");
  CHECK(errorOf(v).find("RANK is not set (WORLD_SIZE=4 is)") == 0);

  v = kTorchrun;
  v.erase("MASTER_ADDR");
  CHECK(errorOf(v).find("MASTER_ADDR is not set") == 0);

  v = kTorchrun;
  v["RANK"] = "4";
  CHECK(errorOf(v) == "RANK=4 is not below WORLD_SIZE=4");

  v = kTorchrun;
  v["RANK"] = "-1";
  CHECK(errorOf(v).find("RANK=-1 is not below WORLD_SIZE=4") == 0);

  v = kTorchrun;
  v["RANK"] = "one";
  CHECK(errorOf(v) == "RANK='one' is not an integer");

  v = kTorchrun;
  v["WORLD_SIZE"] = "0";
  CHECK(errorOf(v) == "WORLD_SIZE=0 must be at least 1");

  v = kTorchrun;
  v["WORLD_SIZE"] = "99999999999";
  CHECK(errorOf(v) == "WORLD_SIZE='99999999999' is not an integer");

  v = kTorchrun;
  v["LOCAL_RANK"] = "7";
  CHECK(errorOf(v) == "LOCAL_RANK=7 is not in [0, WORLD_SIZE=4)");

  v = kTorchrun;
  v["MASTER_PORT"] = "70000";
  CHECK(errorOf(v) == "MASTER_PORT=70000 is not a TCP port (1-65535)");

  v = kTorchrun;
  v["MASTER_PORT"] = "";
  CHECK(errorOf(v) == "MASTER_PORT='' is not an integer");

  v = kTorchrun;
  v["MASTER_ADDR"] = "";
  CHECK(errorOf(v).find("MASTER_ADDR is empty") == 0);
}
