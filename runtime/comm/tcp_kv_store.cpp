#include "runtime/comm/tcp_kv_store.h"

#include <torch/version.h>

#include <exception>

#include "runtime/comm/comm_error.h"
#include "runtime/core/c10_message.h"

namespace gradc::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string storeAddress(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

// The store, on LibTorch's default server backend. Since 2.4 that is libuv's, which a LibTorch
// built without libuv (Debian 13's 2.6) refuses: the classic backend is then asked for instead.
c10::intrusive_ptr<c10d::TCPStore> makeStore(const std::string& host, c10d::TCPStoreOptions options) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    if (!options.useLibUV || !comm::containsNoCase(exceptionMessage(e), "libuv")) throw;
    options.useLibUV = false;
  }
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

}  // namespace

Expected<c10::intrusive_ptr<c10d::TCPStore>> connectTcpStore(const DistEnv& env, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.masterPort);
  options.isServer = env.rank == 0 && !env.storeHostedByLauncher;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return makeStore(env.masterAddr, options);
  } catch (const std::exception& e) {
    std::string what = options.isServer ? "starting the rendezvous store on port " + std::to_string(env.masterPort)
                                        : "connecting to the rendezvous store at " +
                                              storeAddress(env.masterAddr, env.masterPort);
    std::string message = exceptionMessage(e);
    std::string cause = comm::containsNoCase(message, "timed out")
                            ? "nothing answered within the " + comm::formatSeconds(timeout.count() / 1000.0) +
                                  " s timeout (is rank 0 or the launcher running, and MASTER_ADDR:MASTER_PORT right?)"
                            : comm::stripSourceLocation(message);
    return comm::collectiveError(env.rank, what, secondsSince(start), cause);
  }
}

Expected<c10::intrusive_ptr<c10d::TCPStore>> hostTcpStore(int port, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return makeStore("127.0.0.1", options);
  } catch (const std::exception& e) {
    return Error{"starting the rendezvous store on port " + std::to_string(port) + " failed: " +
                 comm::stripSourceLocation(exceptionMessage(e))};
  }
}

Expected<std::unique_ptr<KeyValueStore>> TcpKeyValueStore::connect(const DistEnv& env, std::chrono::milliseconds timeout,
                                                                   std::string prefix) {
  auto store = connectTcpStore(env, timeout);
  if (!store) return store.error();
  return std::unique_ptr<KeyValueStore>(
      std::make_unique<TcpKeyValueStore>(std::move(*store), std::move(prefix), env.rank, timeout));
}

Status TcpKeyValueStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  const auto start = Clock::now();
  try {
    store_->set(prefix_ + key, value);
    return Status::success();
  } catch (const std::exception& e) {
    return comm::collectiveError(rank_, "setting rendezvous key '" + key + "'", secondsSince(start),
                                 comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

Expected<std::vector<std::uint8_t>> TcpKeyValueStore::get(const std::string& key) {
  const auto start = Clock::now();
  try {
    store_->wait({prefix_ + key}, timeout_);
    return store_->get(prefix_ + key);
  } catch (const std::exception& e) {
    return comm::collectiveError(rank_, "reading rendezvous key '" + key + "'", secondsSince(start),
                                 comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

}  // namespace gradc::runtime
