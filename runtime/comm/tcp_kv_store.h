// The rendezvous store of a distributed run: a c10d::TCPStore at MASTER_ADDR:MASTER_PORT.
// Rank 0 hosts it unless the launcher does (DistEnv::storeHostedByLauncher).
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <memory>

#include "ir/status.h"
#include "runtime/comm/dist_env.h"
#include "runtime/comm/kv_store.h"

namespace gradc::runtime {

// Connects to (or, on rank 0 without a launcher-hosted store, starts) the store. Errors read
//   "rank 1: connecting to the rendezvous store at 127.0.0.1:29500 failed after 3 s: ..."
Expected<c10::intrusive_ptr<c10d::TCPStore>> connectTcpStore(const DistEnv& env, std::chrono::milliseconds timeout);

// Starts a store server on 0.0.0.0:`port` (0 = any free port; TCPStore::getPort() tells which)
// that no rank hosts: the launcher's store.
Expected<c10::intrusive_ptr<c10d::TCPStore>> hostTcpStore(int port, std::chrono::milliseconds timeout);

// KeyValueStore over a TCPStore, keys under `prefix`.
class TcpKeyValueStore final : public KeyValueStore {
 public:
  TcpKeyValueStore(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank, std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), timeout_(timeout) {}
  static Expected<std::unique_ptr<KeyValueStore>> connect(const DistEnv& env, std::chrono::milliseconds timeout,
                                                          std::string prefix = "gradc/");

  Status set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  Expected<std::vector<std::uint8_t>> get(const std::string& key) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
  int rank_;
  std::chrono::milliseconds timeout_;
};

}  // namespace gradc::runtime
