// The distributed environment of one rank: who am I, how many are we, where is the rendezvous.
//
// Read from the environment variables set by a launcher:
//   torchrun style (and gradc's launcher, `gradc train --devices N`): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//   Slurm (srun):                        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, plus
//                                        MASTER_ADDR and MASTER_PORT, which Slurm does not set
// RANK/WORLD_SIZE take precedence over the Slurm variables. LOCAL_RANK (SLURM_LOCALID) may be
// left out, and then equals the rank (one node).
//
// The rendezvous is a key-value store (c10d::TCPStore) at MASTER_ADDR:MASTER_PORT. Rank 0
// hosts it, unless a launcher already does: gradc's launcher (GRADC_LAUNCHED=1) and torchrun
// (TORCHELASTIC_USE_AGENT_STORE=True) host it themselves, and then every rank is a client.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "ir/status.h"

namespace gradc::runtime {

struct DistEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
  // True when a launcher hosts the store at masterAddr:masterPort; otherwise rank 0 does.
  bool storeHostedByLauncher = false;
};

// The environment of this process: nullopt when none of RANK, WORLD_SIZE, LOCAL_RANK and
// SLURM_PROCID is set (a plain single-process run; also a one-task Slurm job without
// MASTER_ADDR). An Error names the variable that is missing or wrong, e.g.
//   "WORLD_SIZE is not set (RANK=1 is); set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"
//   "RANK=4 is not below WORLD_SIZE=4"
//   "MASTER_PORT=70000 is not a TCP port (1-65535)"
Expected<std::optional<DistEnv>> distEnvFromEnvironment();

// The same over any lookup (nullptr = not set); for tests and embedding.
using EnvLookup = std::function<const char*(const char* name)>;
Expected<std::optional<DistEnv>> distEnvFromVariables(const EnvLookup& lookup);

}  // namespace gradc::runtime
