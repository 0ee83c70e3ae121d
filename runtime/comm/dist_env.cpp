#include "runtime/comm/dist_env.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace gradc::runtime {
namespace {

// A strict decimal integer: optional '-', digits only, no spaces, fits in an int.
std::optional<long> parseInt(std::string_view text) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  std::size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  long value = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
    if (value > 2147483647L) return std::nullopt;
  }
  return text[0] == '-' ? -value : value;
}

Error missing(const char* name, const std::string& context) {
  return Error{std::string(name) + " is not set (" + context +
               "); set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, or start the ranks with "
               "`gradc train --devices N`, torchrun or srun"};
}

struct Reader {
  const EnvLookup& lookup;

  // The integer value of `name`, or an Error saying what is wrong with it.
  Expected<long> integer(const char* name) const {
    const char* raw = lookup(name);
    auto value = parseInt(raw ? raw : "");
    if (!value) return Error{std::string(name) + "='" + (raw ? raw : "") + "' is not an integer"};
    return *value;
  }
};

}  // namespace

Expected<std::optional<DistEnv>> distEnvFromVariables(const EnvLookup& lookup) {
  auto isSet = [&](const char* name) { return lookup(name) != nullptr; };
  Reader read{lookup};

  const char* rankVar = nullptr;
  const char* worldVar = nullptr;
  const char* localVar = nullptr;
  if (isSet("RANK") || isSet("WORLD_SIZE") || isSet("LOCAL_RANK")) {
    rankVar = "RANK", worldVar = "WORLD_SIZE", localVar = "LOCAL_RANK";
  } else if (isSet("SLURM_PROCID")) {
    rankVar = "SLURM_PROCID", worldVar = "SLURM_NTASKS", localVar = "SLURM_LOCALID";
  } else {
    return std::optional<DistEnv>();
  }
  const bool slurm = std::string_view(rankVar) == "SLURM_PROCID";

  // Name whichever of the two that is set, so the message says why a distributed run was assumed.
  const std::string context = isSet(rankVar) ? std::string(rankVar) + "=" + lookup(rankVar) + " is"
                              : isSet(worldVar) ? std::string(worldVar) + "=" + lookup(worldVar) + " is"
                                                : std::string(localVar) + "=" + lookup(localVar) + " is";
  if (!isSet(rankVar)) return missing(rankVar, context);
  if (!isSet(worldVar)) return missing(worldVar, context);

  auto rank = read.integer(rankVar);
  if (!rank) return rank.error();
  auto world = read.integer(worldVar);
  if (!world) return world.error();
  if (*world < 1) return Error{std::string(worldVar) + "=" + std::to_string(*world) + " must be at least 1"};
  if (*rank < 0 || *rank >= *world) {
    return Error{std::string(rankVar) + "=" + std::to_string(*rank) + " is not below " + worldVar + "=" +
                 std::to_string(*world) + (*rank < 0 ? " (or is negative)" : "")};
  }
  long localRank = *rank;
  if (isSet(localVar)) {
    auto local = read.integer(localVar);
    if (!local) return local.error();
    if (*local < 0 || *local >= *world) {
      return Error{std::string(localVar) + "=" + std::to_string(*local) + " is not in [0, " + worldVar + "=" +
                   std::to_string(*world) + ")"};
    }
    localRank = *local;
  }

  // A single Slurm task without a rendezvous address is an ordinary single-process job.
  if (slurm && *world == 1 && !isSet("MASTER_ADDR") && !isSet("MASTER_PORT")) return std::optional<DistEnv>();

  if (!isSet("MASTER_ADDR")) return missing("MASTER_ADDR", context);
  if (!isSet("MASTER_PORT")) return missing("MASTER_PORT", context);
  std::string addr = lookup("MASTER_ADDR");
  if (addr.empty()) return Error{"MASTER_ADDR is empty; it must name the host of rank 0 (e.g. 127.0.0.1)"};
  auto port = read.integer("MASTER_PORT");
  if (!port) return port.error();
  if (*port < 1 || *port > 65535) {
    return Error{"MASTER_PORT=" + std::to_string(*port) + " is not a TCP port (1-65535)"};
  }

  DistEnv env;
  env.rank = static_cast<int>(*rank);
  env.worldSize = static_cast<int>(*world);
  env.localRank = static_cast<int>(localRank);
  env.masterAddr = std::move(addr);
  env.masterPort = static_cast<int>(*port);
  const char* launched = lookup("GRADC_LAUNCHED");
  const char* agentStore = lookup("TORCHELASTIC_USE_AGENT_STORE");
  env.storeHostedByLauncher = (launched && std::string_view(launched) == "1") ||
                              (agentStore && std::string_view(agentStore) == "True");
  return std::optional<DistEnv>(std::move(env));
}

Expected<std::optional<DistEnv>> distEnvFromEnvironment() {
  return distEnvFromVariables([](const char* name) { return std::getenv(name); });
}

}  // namespace gradc::runtime
